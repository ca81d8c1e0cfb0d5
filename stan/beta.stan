// Beta synthesizer of Hu, Williams & Savitsky (supplement S2):
// y_i ~ Beta(lambda * phi, lambda * (1 - phi)), phi ~ Beta(1, 1),
// lambda ~ Pareto(0.1, 1.5); weighted and optionally censored likelihood.
functions {
#include dpsynth_functions.stan

  // Design of the beta log density: row i is [log y_i, log1m(y_i), -1].
  matrix beta_design(vector y) {
    return append_col(append_col(log(y), log1m(y)), rep_vector(-1, rows(y)));
  }

  // The per-record log-likelihood, defined once:
  //   ll_i = beta_lpdf(y_i | a, b) = (a - 1) log y_i + (b - 1) log(1 - y_i) - lbeta(a, b)
  //        = Z[i] * [a - 1, b - 1, lbeta(a, b)]'   with Z = beta_design(y).
  // One matrix-vector product per gradient, no per-record lgamma calls (several times
  // faster than a loop of beta_lpdf). The result is linear in the rows of Z, so
  // beta_record_log_lik(diag(alpha) * Z, a, b) = alpha .* ll and
  // beta_record_log_lik(alpha' * Z, a, b) = sum(alpha .* ll) (used in the model block).
  vector beta_record_log_lik(matrix Z, real a, real b) {
    return Z * [a - 1, b - 1, lbeta(a, b)]';
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
  // Censored: the weighted terms alpha_i ll_i from the pre-weighted design diag(alpha) Z,
  // saving one autodiff node per record.
  matrix[n, 3] Z_alpha = diag_pre_multiply(alpha, Z);
  // Centred censoring (dpsynth's extension): alpha_i centre_i, and its sum (a constant
  // of the uncensored target, kept so that target = prior + sum(contrib) always).
  vector[n] alpha_centre = alpha .* centre;
  real sum_alpha_centre = sum(alpha_centre);
  // Sub-linear censored sum for alpha all equal (Censor_uw)? Not done, and why:
  // the record term t(y) = (a - 1) log y + (b - 1) log1m(y) - lbeta(a, b) is linear in
  // (log y, log1m y), but both are functions of the one sortable statistic y, and
  // t''(y) = -(a - 1) / y^2 - (b - 1) / (1 - y)^2, t'(y) = (a - 1) / y - (b - 1) / (1 - y):
  // t is concave (a, b >= 1), convex (a, b <= 1) or monotone (a, b on either side of 1).
  // So {t > M} and {t < -M} are each an interval of sorted y or the complement of one:
  // the clamped records form at most three runs of the sorted data, not one interval,
  // with breakpoints that move with (a, b). A prefix-sum form (sort y once; cumulative
  // sums of log y and log1m y; per evaluation, binary-search up to four breakpoints on
  // either side of the mode (a - 1) / (a + b - 2)) would be O(log n) per gradient, but it
  // needs that case analysis and data-dependent indices inside the autodiff graph, while
  // the O(n) form below is one n x 3 matrix-vector product (microseconds at n = 2000).
  // Unequal weights (Censor_w) have no single ordering at all. The O(n) form stays.
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
    // centre, alpha, 1, M).
    target += sum(fmin(fmax(beta_record_log_lik(Z_alpha, beta1, beta2) - alpha_centre, -M), M));
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
