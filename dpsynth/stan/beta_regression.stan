// Weighted beta regression for the SDR application of Hu, Williams & Savitsky
// (Section 5): scaled salary y in (0, 1), logit(mu_i) = X_i beta, precision kappa,
// y_i ~ Beta(mu_i kappa, (1 - mu_i) kappa).
// Priors (not stated in the paper; dpsynth's choice): beta ~ normal(0, 2.5),
// kappa ~ gamma(2, 0.1).
// kappa_fixed = 1 fixes the precision at the PUBLIC value kappa_known instead of fitting
// it (dpsynth's extension, a whole table's calibrated column: Model.with_known_dispersion);
// kappa_fixed = 0, the default the library passes, is the paper's model.
functions {
#include dpsynth_functions.stan

  // The per-record log-likelihood, defined once:
  //   ll_i = beta_lpdf(y_i | mu_i kappa, (1 - mu_i) kappa), mu = inv_logit(X beta),
  //        = (a_i - 1) log y_i + (b_i - 1) log(1 - y_i) + lgamma(kappa) - lgamma(a_i) - lgamma(b_i);
  // log_y = log(y) and log1m_y = log1m(y) are passed in, computed once from the data.
  vector beta_regression_record_log_lik(vector log_y, vector log1m_y, matrix X, vector beta,
                                        real kappa) {
    vector[rows(log_y)] a = inv_logit(X * beta) * kappa;
    vector[rows(log_y)] b = kappa - a;
    return (a - 1) .* log_y + (b - 1) .* log1m_y + lgamma(kappa) - lgamma(a) - lgamma(b);
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
  vector<lower=0, upper=1>[n] y;
  int<lower=1> K;
  matrix[n, K] X;
  int<lower=0, upper=1> kappa_fixed;  // 1: kappa is the public kappa_known, not fitted
  real<lower=0> kappa_known;  // used only when kappa_fixed = 1
}
transformed data {
  vector[n] log_y = log(y);
  vector[n] log1m_y = log1m(y);
}
parameters {
  vector[K] beta;
  real<lower=0> kappa_free;  // kappa when fitted; its prior alone when kappa_fixed = 1
}
transformed parameters {
  real<lower=0> kappa = kappa_fixed == 1 ? kappa_known : kappa_free;
}
model {
  beta ~ normal(0, 2.5);
  kappa_free ~ gamma(2, 0.1);
  target += dpsynth_centred_target(beta_regression_record_log_lik(log_y, log1m_y, X, beta,
                                                                  kappa),
                                   centre, alpha, censor, M);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = beta_regression_record_log_lik(log_y, log1m_y, X, beta, kappa);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    vector[n] mu = inv_logit(X * beta);
    y_rep = beta_rng(mu * kappa, (1 - mu) * kappa);
  }
}
