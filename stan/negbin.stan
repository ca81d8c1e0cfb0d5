// Weighted negative binomial regression with log link (mean / over-dispersion
// parameterization: Var(y) = mu + mu^2 / phi), the synthesizer of the
// vector-weighted paper's NB-mixture simulation and SDR salary application.
// Priors (not stated in the paper; dpsynth's choice): beta ~ normal(0, 10),
// phi ~ gamma(2, 0.1) (weakly informative, mean 20).
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
  array[n] int<lower=0> y;
  int<lower=1> K;
  matrix[n, K] X;
}
transformed data {
  vector[n] y_vec = to_vector(y);
  vector[n] lgamma_y1 = lgamma(y_vec + 1);
}
parameters {
  vector[K] beta;
  real<lower=0> phi;
}
model {
  vector[n] eta = X * beta;
  // neg_binomial_2_log_lpmf(y | eta, phi), vectorized per record:
  // lchoose(y + phi - 1, y) + y (eta - log(exp(eta) + phi)) + phi (log phi - log(exp(eta) + phi))
  vector[n] log_mu_phi = log_sum_exp_vec(eta, log(phi));
  vector[n] ll = lgamma(y_vec + phi) - lgamma(phi) - lgamma_y1
                 + y_vec .* (eta - log_mu_phi) + phi * (log(phi) - log_mu_phi);
  beta ~ normal(0, 10);
  phi ~ gamma(2, 0.1);
  target += dpsynth_target(ll, alpha, censor, M);
}
generated quantities {
  vector[want_log_lik ? n : 0] log_lik;
  vector[want_log_lik ? n : 0] log_lik_raw;
  array[want_rep ? n : 0] int y_rep;
  if (want_log_lik == 1) {
    vector[n] eta = X * beta;
    vector[n] log_mu_phi = log_sum_exp_vec(eta, log(phi));
    vector[n] ll = lgamma(y_vec + phi) - lgamma(phi) - lgamma_y1
                   + y_vec .* (eta - log_mu_phi) + phi * (log(phi) - log_mu_phi);
    log_lik = dpsynth_contrib(ll, alpha, censor, M);
    log_lik_raw = alpha .* ll;
  }
  if (want_rep == 1) {
    y_rep = neg_binomial_2_log_rng(X * beta, phi);
  }
}
