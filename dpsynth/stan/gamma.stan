// Gamma synthesizer for a positive skewed outcome (dpsynth's model, not the papers'):
// y_i ~ Gamma(shape, rate), rate = shape / exp(log_mean), y on the Stan scale in (0, 1]
// (public bounds [lo, hi] map y to y / hi when lo > 0, else to (y - lo + 0.5) / (hi - lo + 1),
// as for the beta model: dpsynth.models.scaling.positive_to_scale).
// The per-record log-likelihood is the log density of log y_i, i.e. the gamma density of y_i
// plus log y_i: the dropped term -log y_i is a function of the record alone (a record-only
// centring, which keeps the censoring guarantee of Hu, Williams & Savitsky, Eq. 3.5), and
// without it ll is free of the scale of y.
// Priors (dpsynth's choice, weakly informative on the unit scale): log_mean ~ normal(-2, 3),
// shape ~ gamma(2, 0.5) (mean 4).
functions {
#include dpsynth_functions.stan

  // Design of the gamma log density of log y: row i is [log y_i, y_i, 1].
  matrix gamma_design(vector y) {
    return append_col(append_col(log(y), y), rep_vector(1, rows(y)));
  }

  // The coefficients w(log_mean, shape) of the per-record statistics: ll_i = Z[i] * w,
  // w = [a, -b, a log b - lgamma(a)], a = shape, b = shape / exp(log_mean).
  vector gamma_coefficients(real log_mean, real shape) {
    real log_rate = log(shape) - log_mean;
    return [shape, -exp(log_rate), shape * log_rate - lgamma(shape)]';
  }

  // The per-record log-likelihood, defined once:
  //   ll_i = gamma_lpdf(y_i | a, b) + log y_i = a log b - lgamma(a) + a log y_i - b y_i
  //        = Z[i] * w(log_mean, shape),  Z = gamma_design(y).
  // Linear in the rows of Z (as beta.stan).
  vector gamma_record_log_lik(matrix Z, real log_mean, real shape) {
    return Z * gamma_coefficients(log_mean, shape);
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
  vector<lower=0>[n] y;
}
transformed data {
  matrix[n, 3] Z = gamma_design(y);
  matrix[1, 3] alpha_Z = to_matrix(alpha' * Z);
  real sum_alpha_centre = dot_product(alpha, centre);
  // Censored: records sorted by y, blocks of about sqrt(n) (as beta.stan; exact).
  array[n] int by_y = sort_indices_asc(y);
  matrix[n, 3] Z_alpha = diag_pre_multiply(alpha, Z)[by_y];
  vector[n] alpha_centre = (alpha .* centre)[by_y];
  int B = dpsynth_block_size(n);
  matrix[dpsynth_n_blocks(n, B), 12] blocks = dpsynth_blocks(Z_alpha, alpha_centre, B);
}
parameters {
  real log_mean;
  real<lower=0> shape;
}
model {
  log_mean ~ normal(-2, 3);
  shape ~ gamma(2, 0.5);
  if (censor == 1) {
    // dpsynth_centred_target(gamma_record_log_lik(Z, log_mean, shape), centre, alpha, 1, M),
    // by blocks.
    target += dpsynth_blocked_censored_sum(gamma_coefficients(log_mean, shape), Z_alpha,
                                           alpha_centre, blocks, B, M);
  } else {
    // dpsynth_centred_target(gamma_record_log_lik(Z, log_mean, shape), centre, alpha, 0, M).
    target += gamma_record_log_lik(alpha_Z, log_mean, shape)[1] - sum_alpha_centre;
  }
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = gamma_record_log_lik(Z, log_mean, shape);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    y_rep = gamma_rng(rep_vector(shape, n), rep_vector(shape * exp(-log_mean), n));
  }
}
