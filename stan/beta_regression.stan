// Weighted beta regression for the SDR application of Hu, Williams & Savitsky
// (Section 5): scaled salary y in (0, 1), logit(mu_i) = X_i beta, precision kappa,
// y_i ~ Beta(mu_i kappa, (1 - mu_i) kappa).
// Priors (not stated in the paper; dpsynth's choice): beta ~ normal(0, 2.5),
// kappa ~ gamma(2, 0.1).
functions {
#include dpsynth_functions.stan
}
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=1> censor;
  real<lower=0> M;
  int<lower=0, upper=1> want_log_lik;
  int<lower=0, upper=1> want_rep;
  vector<lower=0, upper=1>[n] y;
  int<lower=1> K;
  matrix[n, K] X;
}
transformed data {
  vector[n] log_y = log(y);
  vector[n] log1m_y = log1m(y);
}
parameters {
  vector[K] beta;
  real<lower=0> kappa;
}
model {
  vector[n] mu = inv_logit(X * beta);
  vector[n] a = mu * kappa;
  vector[n] b = kappa - a;
  vector[n] ll = (a - 1) .* log_y + (b - 1) .* log1m_y + lgamma(kappa) - lgamma(a) - lgamma(b);
  beta ~ normal(0, 2.5);
  kappa ~ gamma(2, 0.1);
  target += dpsynth_target(ll, alpha, censor, M);
}
generated quantities {
  vector[want_log_lik ? n : 0] log_lik;
  vector[want_log_lik ? n : 0] log_lik_raw;
  array[want_rep ? n : 0] real y_rep;
  if (want_log_lik == 1) {
    vector[n] mu = inv_logit(X * beta);
    vector[n] a = mu * kappa;
    vector[n] b = kappa - a;
    vector[n] ll = (a - 1) .* log_y + (b - 1) .* log1m_y + lgamma(kappa) - lgamma(a) - lgamma(b);
    log_lik = dpsynth_contrib(ll, alpha, censor, M);
    log_lik_raw = alpha .* ll;
  }
  if (want_rep == 1) {
    vector[n] mu = inv_logit(X * beta);
    y_rep = beta_rng(mu * kappa, (1 - mu) * kappa);
  }
}
