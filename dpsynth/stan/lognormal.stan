// Log-normal synthesizer for a positive skewed outcome (dpsynth's model, not the papers'):
// log y_i ~ Normal(mu, sigma), y on the Stan scale in (0, 1] (public bounds [lo, hi] map y to
// y / hi when lo > 0, and to (y - lo + 0.5) / (hi - lo + 1) when lo <= 0, as for the beta model;
// dpsynth.models.scaling.positive_to_scale).
// The per-record log-likelihood is the log density of log y_i, i.e. the log-normal density
// of y_i plus log y_i. The dropped Jacobian term -log y_i is a function of the record alone:
// leaving it out is a record-only centring, which keeps the censoring guarantee (Hu, Williams
// & Savitsky, Eq. 3.5; book/which_mechanism.md), and makes ll free of the scale of y, so a
// wide public upper bound does not push every record's ll above M.
// Priors (dpsynth's choice, weakly informative on the log of the unit scale, where
// log y < 0): mu ~ normal(-2, 3), sigma ~ half-normal(0, 2).
functions {
#include dpsynth_functions.stan

  // Design of the log-normal log density: row i is [log(y_i)^2, log y_i, 1].
  matrix lognormal_design(vector y) {
    vector[rows(y)] u = log(y);
    return append_col(append_col(square(u), u), rep_vector(1, rows(y)));
  }

  // The coefficients w(mu, sigma) of the per-record statistics Z[i]: ll_i = Z[i] * w.
  vector lognormal_coefficients(real mu, real sigma) {
    real p = inv_square(sigma);
    return [-0.5 * p, mu * p, -0.5 * square(mu) * p - log(sigma) - 0.5 * log(2 * pi())]';
  }

  // The per-record log-likelihood, defined once:
  //   ll_i = normal_lpdf(log y_i | mu, sigma)
  //        = -(log y_i - mu)^2 / (2 sigma^2) - log sigma - log(2 pi) / 2 = Z[i] * w(mu, sigma),
  // Z = lognormal_design(y). Linear in the rows of Z (as beta.stan): applied to
  // diag(alpha) Z it gives alpha .* ll, applied to alpha' Z the weighted sum.
  vector lognormal_record_log_lik(matrix Z, real mu, real sigma) {
    return Z * lognormal_coefficients(mu, sigma);
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
  matrix[n, 3] Z = lognormal_design(y);
  // Uncensored: sum_i alpha_i ll_i from three weighted sufficient statistics alpha' Z.
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
  real mu;
  real<lower=0> sigma;
}
model {
  mu ~ normal(-2, 3);
  sigma ~ normal(0, 2);
  if (censor == 1) {
    // dpsynth_centred_target(lognormal_record_log_lik(Z, mu, sigma), centre, alpha, 1, M),
    // by blocks.
    target += dpsynth_blocked_censored_sum(lognormal_coefficients(mu, sigma), Z_alpha,
                                           alpha_centre, blocks, B, M);
  } else {
    // dpsynth_centred_target(lognormal_record_log_lik(Z, mu, sigma), centre, alpha, 0, M).
    target += lognormal_record_log_lik(alpha_Z, mu, sigma)[1] - sum_alpha_centre;
  }
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = lognormal_record_log_lik(Z, mu, sigma);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    y_rep = exp(normal_rng(rep_vector(mu, n), sigma));
  }
}
