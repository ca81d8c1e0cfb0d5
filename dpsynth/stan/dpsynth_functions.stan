  // dpsynth shared functions: the weighting and censoring convention.
  // Included inside every program's functions {} block with
  //   #include dpsynth_functions.stan
  // Censored pseudo likelihood of Hu, Williams & Savitsky, Eq. (3.5): each
  // weighted log-likelihood contribution alpha_i * ll_i is clamped to [-M, M],
  // M = epsilon / 2; with censor = 0 it is the pseudo likelihood of Eq. (2.3).
  //
  // Names used by every program of the convention (see book/stan_convention.md):
  //   ll / record_log_lik  the unweighted per-record log-likelihood ll_i;
  //   contrib_uncensored   alpha_i * ll_i;
  //   contrib              the term that enters the target: alpha_i * ll_i, clamped
  //                        to [-M, M] when censor = 1 (= dpsynth_contrib below).

  // The per-record terms that enter the target (generated quantity `contrib`):
  // alpha .* ll, clamped to [-M, M] when censor = 1, or smoothly, M tanh(alpha .* ll / M),
  // when censor = 2 (dpsynth's extension, beyond the papers: a term in (-M, M) with no kink,
  // so the proof of Eq. (3.5), which uses only |term| <= M, is unchanged; a program opts in
  // by declaring censor's upper bound 2).
  vector dpsynth_contrib(vector ll, vector alpha, int censor, real M) {
    if (censor == 1) {
      return fmin(fmax(alpha .* ll, -M), M);
    }
    if (censor == 2) {
      return M * tanh(alpha .* ll / M);
    }
    return alpha .* ll;
  }

  // Their sum, the log pseudo likelihood added to target:
  // dpsynth_target(ll, alpha, censor, M) == sum(dpsynth_contrib(ll, alpha, censor, M)).
  real dpsynth_target(vector ll, vector alpha, int censor, real M) {
    if (censor == 1) {
      return sum(fmin(fmax(alpha .* ll, -M), M));
    }
    if (censor == 2) {
      return M * sum(tanh(alpha .* ll / M));
    }
    return dot_product(alpha, ll);
  }

  // Centred censoring (dpsynth's extension, beyond the papers): each record's
  // log-likelihood is first centred by a record-only value centre_i (a function of
  // record i and public quantities, never of other records), then weighted and clamped:
  // alpha_i (ll_i - centre_i), clamped to [-M, M] when censor = 1. The proof of Eq. (3.5)
  // is unchanged: neighbours differ in one clamped term (book/which_mechanism.md).
  // centre = 0 is exactly the paper's mechanism (ll - 0 == ll in floating point).
  vector dpsynth_centred_contrib(vector ll, vector centre, vector alpha, int censor, real M) {
    return dpsynth_contrib(ll - centre, alpha, censor, M);
  }

  // Their sum: dpsynth_centred_target(ll, centre, alpha, censor, M)
  //   == sum(dpsynth_centred_contrib(ll, centre, alpha, censor, M)).
  real dpsynth_centred_target(vector ll, vector centre, vector alpha, int censor, real M) {
    return dpsynth_target(ll - centre, alpha, censor, M);
  }

  // Elementwise log(exp(a_i) + exp(b)) for a vector a and scalar b.
  vector log_sum_exp_vec(vector a, real b) {
    vector[rows(a)] m = fmax(a, b);
    return m + log(exp(a - m) + exp(b - m));
  }

  // Number of distinct values of an integer array (for grouping records by outcome).
  int dpsynth_n_unique(array[] int y) {
    int n = size(y);
    if (n == 0) {
      return 0;
    }
    array[n] int s = sort_asc(y);
    int u = 1;
    for (i in 2:n) {
      if (s[i] != s[i - 1]) {
        u += 1;
      }
    }
    return u;
  }

  // 1 when every row of X equals the first (an intercept-only design), else 0.
  int dpsynth_rows_equal(matrix X) {
    int n = rows(X);
    if (n == 0) {
      return 0;
    }
    return max(abs(X - rep_matrix(X[1], n))) == 0;
  }

  // Records grouped by distinct outcome (count models): one row per distinct y with
  // columns (y_u, number of records, their weight, their centre, 1 if every record of the
  // group has the same weight and centre, else 0). With an intercept-only design every
  // per-record term depends on y alone, so a censored sum over the records equals the
  // count-weighted sum over the groups, exactly, at O(distinct outcomes) per gradient.
  matrix dpsynth_outcome_groups(array[] int y, vector alpha, vector centre) {
    int n = size(y);
    matrix[dpsynth_n_unique(y), 5] g = rep_matrix(0, dpsynth_n_unique(y), 5);
    array[n] int ord = sort_indices_asc(y);
    int u = 0;
    for (j in 1:n) {
      int i = ord[j];
      if (j == 1 || y[i] != y[ord[j - 1]]) {
        u += 1;
        g[u, 1] = y[i];
        g[u, 3] = alpha[i];
        g[u, 4] = centre[i];
        g[u, 5] = 1;
      } else if (alpha[i] != g[u, 3] || centre[i] != g[u, 4]) {
        g[u, 5] = 0;
      }
      g[u, 2] += 1;
    }
    return g;
  }

  // ---- Blocked censored sum (sub-linear per gradient), for records whose log-likelihood
  // is linear in per-record statistics: ll_i = Z[i] * w(theta) (an exponential family with
  // an intercept-only design, e.g. beta: Z[i] = [log y_i, log1m(y_i), -1]).
  // The caller passes A = diag(alpha) Z and ac = alpha .* centre with the records sorted
  // (by y, so that neighbouring records have neighbouring terms), cut into blocks of B
  // consecutive records. dpsynth_blocks keeps, per block, the column-wise min, max and sum
  // of A and the min, max and sum of ac. dpsynth_blocked_censored_sum then returns
  //   sum_i fmin(fmax(A[i] * w - ac[i], -M), M)
  // exactly: from each block's box bound on its terms t_i = A[i] * w - ac[i], a block
  // with every t_i >= M adds count * M, one with every t_i <= -M adds -count * M, one
  // inside [-M + tol, M - tol] adds its sums (sum A) * w - sum(ac), and only the blocks that
  // straddle a bound are summed record by record. The box bound is conservative, so the
  // result equals the record-by-record sum up to rounding (tests/test_models.py); the tol
  // (1e-9 M) keeps every unclamped record's term inside [-M, M] despite rounding. Cost per
  // gradient: O(blocks + records in straddling blocks) instead of O(n).

  // Smallest B with B * B >= n (blocks of about sqrt(n) records), at least 1.
  int dpsynth_block_size(int n) {
    int B = 1;
    while (1.0 * B * B < n) {
      B += 1;
    }
    return B;
  }

  int dpsynth_n_blocks(int n, int B) {
    return n == 0 ? 0 : (n - 1) %/% B + 1;
  }

  // Block summaries: row b = [min A (k), max A (k), sum A (k), min ac, max ac, sum ac]
  // over records (b - 1) B + 1 ... min(b B, n).
  matrix dpsynth_blocks(matrix A, vector ac, int B) {
    int n = rows(A);
    int k = cols(A);
    int nb = dpsynth_n_blocks(n, B);
    matrix[nb, 3 * k + 3] blk;
    for (b in 1:nb) {
      int s = (b - 1) * B + 1;
      int e = min(b * B, n);
      for (j in 1:k) {
        blk[b, j] = min(A[s:e, j]);
        blk[b, k + j] = max(A[s:e, j]);
        blk[b, 2 * k + j] = sum(A[s:e, j]);
      }
      blk[b, 3 * k + 1] = min(ac[s:e]);
      blk[b, 3 * k + 2] = max(ac[s:e]);
      blk[b, 3 * k + 3] = sum(ac[s:e]);
    }
    return blk;
  }

  real dpsynth_blocked_censored_sum(vector w, matrix A, vector ac, matrix blk, int B, real M) {
    int n = rows(A);
    int k = rows(w);
    int nb = rows(blk);
    if (nb == 0) {
      return 0;
    }
    real tol = 1e-9 * M;
    // box bounds of t = A w - ac per block: low ends of A where w >= 0, high ends elsewhere
    vector[k] w_pos = fmax(w, 0);
    vector[k] w_neg = fmin(w, 0);
    vector[nb] t_lo = block(blk, 1, 1, nb, k) * w_pos + block(blk, 1, k + 1, nb, k) * w_neg
                      - col(blk, 3 * k + 2);
    vector[nb] t_hi = block(blk, 1, k + 1, nb, k) * w_pos + block(blk, 1, 1, nb, k) * w_neg
                      - col(blk, 3 * k + 1);
    array[nb] int inside;
    int n_inside = 0;
    int n_up = 0;
    int n_down = 0;
    real total = 0;
    for (b in 1:nb) {
      int s = (b - 1) * B + 1;
      int e = min(b * B, n);
      if (t_lo[b] >= M) {
        n_up += e - s + 1;
      } else if (t_hi[b] <= -M) {
        n_down += e - s + 1;
      } else if (t_lo[b] >= -M + tol && t_hi[b] <= M - tol) {
        n_inside += 1;
        inside[n_inside] = b;
      } else {
        total += sum(fmin(fmax(A[s:e] * w - ac[s:e], -M), M));
      }
    }
    if (n_inside > 0) {
      total += (rep_row_vector(1, n_inside) * blk[inside[1:n_inside], (2 * k + 1):(3 * k)]) * w
               - sum(blk[inside[1:n_inside], 3 * k + 3]);
    }
    return total + M * (n_up - n_down);
  }
