// Test-only program (dpsynth convention): y_i ~ normal(mu, sigma) with known
// sigma and mu ~ normal(mu0, tau0). The alpha-weighted posterior of mu is
// normal with precision 1/tau0^2 + sum(alpha)/sigma^2 (closed form).
functions {
#include dpsynth_functions.stan

  // The per-record log-likelihood, defined once: ll_i = normal_lpdf(y_i | mu, sigma).
  vector normal_record_log_lik(vector y, real mu, real sigma) {
    return -0.5 * square((y - mu) / sigma) - log(sigma) - 0.5 * log(2 * pi());
  }
}
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=1> censor;
  real<lower=0> M;
  int<lower=0, upper=1> want_contrib;
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
  mu ~ normal(mu0, tau0);
  target += dpsynth_target(normal_record_log_lik(y, mu, sigma), alpha, censor, M);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = normal_record_log_lik(y, mu, sigma);
    contrib = dpsynth_contrib(record_log_lik, alpha, censor, M);
    contrib_uncensored = alpha .* record_log_lik;
  }
  if (want_rep == 1) {
    y_rep = normal_rng(rep_vector(mu, n), sigma);
  }
}
