// Gamma regression for a positive skewed outcome (dpsynth's model, not the papers'):
// y_i ~ Gamma(shape, shape / mu_i), log mu_i = X_i beta (mean mu_i, variance mu_i^2 / shape),
// y on the Stan scale in (0, 1] (public bounds [lo, hi] map y to y / hi when lo > 0, else to
// (y - lo + 0.5) / (hi - lo + 1): dpsynth.models.scaling.positive_to_scale);
// X has an intercept column first.
// The per-record log-likelihood is the log density of log y_i (see gamma.stan: the dropped
// term -log y_i is a record-only centring, and ll is free of the scale of y).
// Priors (dpsynth's choice): intercept ~ normal(-2, 3), other coefficients ~ normal(0, 2.5),
// shape ~ gamma(2, 0.5).
functions {
#include dpsynth_functions.stan

  // The per-record log-likelihood, defined once:
  //   ll_i = gamma_lpdf(y_i | a, a / mu_i) + log y_i, eta = X beta = log mu,
  //        = a (log a - eta_i + log y_i) - lgamma(a) - a y_i exp(-eta_i);
  // log_y = log(y) is computed once from the data.
  vector gamma_regression_record_log_lik(vector y, vector log_y, matrix X, vector beta,
                                         real shape) {
    vector[rows(y)] eta = X * beta;
    return shape * (log(shape) - eta + log_y) - lgamma(shape) - shape * (y .* exp(-eta));
  }
}
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=2> censor;  // 0 none, 1 hard clamp, 2 smooth (dpsynth_functions.stan)
  real<lower=0> M;
  int<lower=0, upper=1> want_contrib;
  int<lower=0, upper=1> want_rep;
  vector[n] centre;  // record-only centring of ll (dpsynth's extension; 0 = the paper)
  vector<lower=0>[n] y;
  int<lower=1> K;
  matrix[n, K] X;
}
transformed data {
  vector[n] log_y = log(y);
}
parameters {
  vector[K] beta;
  real<lower=0> shape;
}
model {
  beta[1] ~ normal(-2, 3);
  if (K > 1) {
    beta[2:K] ~ normal(0, 2.5);  // an intercept-only design (K = 1) has no slopes
  }
  shape ~ gamma(2, 0.5);
  target += dpsynth_centred_target(gamma_regression_record_log_lik(y, log_y, X, beta, shape),
                                   centre, alpha, censor, M);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = gamma_regression_record_log_lik(y, log_y, X, beta, shape);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    y_rep = gamma_rng(rep_vector(shape, n), shape * exp(-(X * beta)));
  }
}
