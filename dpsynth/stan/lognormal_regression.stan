// Log-normal regression for a positive skewed outcome (dpsynth's model, not the papers'):
// log y_i ~ Normal(X_i beta, sigma_i), y on the Stan scale in (0, 1] (public bounds [lo, hi]
// map y to y / hi when lo > 0, else to (y - lo + 0.5) / (hi - lo + 1):
// dpsynth.models.scaling.positive_to_scale); X has an intercept column first. The spread is
// one sigma (spread_by_design = 0) or varies with the design (spread_by_design = 1):
// log sigma_i = log sigma + X_i[2:K] gamma, so the dollar-scale mean exp(X_i beta +
// sigma_i^2 / 2) of each group follows its own spread.
// The per-record log-likelihood is the log density of log y_i (see lognormal.stan: the
// dropped term -log y_i is a record-only centring, and ll is free of the scale of y).
// Priors (dpsynth's choice): intercept ~ normal(-2, 3), other coefficients ~ normal(0, 2.5),
// sigma ~ half-normal(0, 2), gamma ~ normal(0, 1) (a design feature lies in [0, 1]).
functions {
#include dpsynth_functions.stan

  // log sigma_i = log sigma + X_i[2:K] gamma (the spread by the design).
  vector lognormal_regression_log_sigma(matrix X, real sigma, vector gamma) {
    return log(sigma) + X[:, 2:cols(X)] * gamma;
  }

  // The per-record log-likelihood, defined once:
  //   ll_i = normal_lpdf(log y_i | X_i beta, sigma_i); log_y = log(y) is computed once.
  // One sigma (gamma empty) is the expression of the constant-spread program, unchanged.
  vector lognormal_regression_record_log_lik(vector log_y, matrix X, vector beta,
                                             real sigma, vector gamma) {
    if (num_elements(gamma) == 0) {
      return -0.5 * square((log_y - X * beta) / sigma) - log(sigma) - 0.5 * log(2 * pi());
    }
    vector[rows(X)] log_sigma = lognormal_regression_log_sigma(X, sigma, gamma);
    return -0.5 * square((log_y - X * beta) ./ exp(log_sigma)) - log_sigma
           - 0.5 * log(2 * pi());
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
  int<lower=0, upper=1> spread_by_design;
}
transformed data {
  vector[n] log_y = log(y);
}
parameters {
  vector[K] beta;
  real<lower=0> sigma;
  vector[spread_by_design ? K - 1 : 0] gamma;
}
model {
  beta[1] ~ normal(-2, 3);
  if (K > 1) {
    beta[2:K] ~ normal(0, 2.5);  // an intercept-only design (K = 1) has no slopes
  }
  sigma ~ normal(0, 2);
  gamma ~ normal(0, 1);
  target += dpsynth_centred_target(
      lognormal_regression_record_log_lik(log_y, X, beta, sigma, gamma), centre, alpha, censor, M);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = lognormal_regression_record_log_lik(log_y, X, beta, sigma, gamma);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    if (num_elements(gamma) == 0) {
      y_rep = exp(normal_rng(X * beta, sigma));
    } else {
      y_rep = exp(normal_rng(X * beta, exp(lognormal_regression_log_sigma(X, sigma, gamma))));
    }
  }
}
