// Test-only program (dpsynth convention): y_i ~ normal(mu, sigma) with known
// sigma and mu ~ normal(mu0, tau0). The alpha-weighted posterior of mu is
// normal with precision 1/tau0^2 + sum(alpha)/sigma^2 (closed form).
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
  vector[n] y;
  real<lower=0> sigma;
  real mu0;
  real<lower=0> tau0;
}
parameters {
  real mu;
}
model {
  vector[n] ll = -0.5 * square((y - mu) / sigma) - log(sigma) - 0.5 * log(2 * pi());
  mu ~ normal(mu0, tau0);
  target += dpsynth_target(ll, alpha, censor, M);
}
generated quantities {
  vector[want_log_lik ? n : 0] log_lik;
  vector[want_log_lik ? n : 0] log_lik_raw;
  array[want_rep ? n : 0] real y_rep;
  if (want_log_lik == 1) {
    vector[n] ll = -0.5 * square((y - mu) / sigma) - log(sigma) - 0.5 * log(2 * pi());
    log_lik = dpsynth_contrib(ll, alpha, censor, M);
    log_lik_raw = alpha .* ll;
  }
  if (want_rep == 1) {
    y_rep = normal_rng(rep_vector(mu, n), sigma);
  }
}
