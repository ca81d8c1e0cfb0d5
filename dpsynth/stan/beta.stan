// Beta synthesizer of Hu, Williams & Savitsky (supplement S2):
// y_i ~ Beta(lambda * phi, lambda * (1 - phi)), phi ~ Beta(1, 1),
// lambda ~ Pareto(0.1, 1.5); weighted and optionally censored likelihood.
functions {
#include dpsynth_functions.stan

  // Design of the beta log density: row i is [log y_i, log1m(y_i), -1].
  matrix beta_design(vector y) {
    return append_col(append_col(log(y), log1m(y)), rep_vector(-1, rows(y)));
  }

  // The coefficients w(a, b) of the per-record statistics Z[i]: ll_i = Z[i] * w(a, b).
  vector beta_coefficients(real a, real b) {
    return [a - 1, b - 1, lbeta(a, b)]';
  }

  // The per-record log-likelihood, defined once:
  //   ll_i = beta_lpdf(y_i | a, b) = (a - 1) log y_i + (b - 1) log(1 - y_i) - lbeta(a, b)
  //        = Z[i] * w(a, b),  w = beta_coefficients(a, b),  Z = beta_design(y).
  // One matrix-vector product per gradient, no per-record lgamma calls (several times
  // faster than a loop of beta_lpdf). The result is linear in the rows of Z, so
  // beta_record_log_lik(diag(alpha) * Z, a, b) = alpha .* ll and
  // beta_record_log_lik(alpha' * Z, a, b) = sum(alpha .* ll) (used in the model block).
  vector beta_record_log_lik(matrix Z, real a, real b) {
    return Z * beta_coefficients(a, b);
  }
}
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=1> censor;
  real<lower=0> M;
  int<lower=0, upper=1> want_contrib;
  int<lower=0, upper=1> want_rep;
  vector[n] centre;  // record-only centring of ll (dpsynth's extension; 0 = the paper)
  vector<lower=0, upper=1>[n] y;
}
transformed data {
  matrix[n, 3] Z = beta_design(y);
  // Uncensored: sum_i alpha_i ll_i from three weighted sufficient statistics alpha' Z.
  matrix[1, 3] alpha_Z = to_matrix(alpha' * Z);
  // Centred censoring (dpsynth's extension): alpha_i centre_i, and its sum (a constant
  // of the uncensored target, kept so that target = prior + sum(contrib) always).
  real sum_alpha_centre = dot_product(alpha, centre);
  // Censored: the weighted terms alpha_i ll_i - alpha_i centre_i = A[i] * w - ac[i] from the
  // pre-weighted design A = diag(alpha) Z, records sorted by y and cut into blocks of
  // about sqrt(n) (dpsynth_blocks): per gradient, only the blocks that straddle -M or M are
  // summed record by record (dpsynth_blocked_censored_sum, exact). The order of the records
  // does not change the sum.
  array[n] int by_y = sort_indices_asc(y);
  matrix[n, 3] Z_alpha = diag_pre_multiply(alpha, Z)[by_y];
  vector[n] alpha_centre = (alpha .* centre)[by_y];
  int B = dpsynth_block_size(n);
  matrix[dpsynth_n_blocks(n, B), 12] blocks = dpsynth_blocks(Z_alpha, alpha_centre, B);
}
parameters {
  real<lower=0, upper=1> phi;
  real<lower=0.1> lambda;
}
transformed parameters {
  real<lower=0> beta1 = lambda * phi;
  real<lower=0> beta2 = lambda * (1 - phi);
}
model {
  phi ~ beta(1, 1);
  lambda ~ pareto(0.1, 1.5);
  if (censor == 1) {
    // Eq. (3.5), centred: dpsynth_centred_target(beta_record_log_lik(Z, beta1, beta2),
    // centre, alpha, 1, M), by blocks.
    target += dpsynth_blocked_censored_sum(beta_coefficients(beta1, beta2), Z_alpha,
                                           alpha_centre, blocks, B, M);
  } else {
    // Eq. (2.3): dpsynth_centred_target(beta_record_log_lik(Z, beta1, beta2), centre, alpha, 0, M).
    target += beta_record_log_lik(alpha_Z, beta1, beta2)[1] - sum_alpha_centre;
  }
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = beta_record_log_lik(Z, beta1, beta2);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    y_rep = beta_rng(rep_vector(beta1, n), rep_vector(beta2, n));
  }
}
