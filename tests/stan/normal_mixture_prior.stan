// Test-only program (dpsynth convention): y_i ~ normal(mu, sigma) with known sigma
// and a two-component prior mu ~ 0.5 normal(mu0 - d, tau0) + 0.5 normal(mu0 + d, tau0).
//  - d = 0: the prior is normal(mu0, tau0) and the alpha-weighted posterior of mu is
//    normal with precision 1/tau0^2 + sum(alpha)/sigma^2 (closed form);
//  - n = 0 and d >> tau0: the posterior has two far-apart modes mu0 +- d, so chains
//    started in different modes never mix (a known-bad R-hat).
// Self-contained (no #include) so that its compiled model does not change when the
// shared functions file does.
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
  real<lower=0> d;
}
parameters {
  real mu;
}
model {
  vector[n] wll = alpha .* (-0.5 * square((y - mu) / sigma) - log(sigma) - 0.5 * log(2 * pi()));
  target += log_mix(0.5, normal_lpdf(mu | mu0 - d, tau0), normal_lpdf(mu | mu0 + d, tau0));
  if (censor == 1) {
    target += sum(fmin(fmax(wll, -M), M));
  } else {
    target += sum(wll);
  }
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = -0.5 * square((y - mu) / sigma) - log(sigma) - 0.5 * log(2 * pi());
    contrib_uncensored = alpha .* record_log_lik;
    contrib = censor == 1 ? fmin(fmax(contrib_uncensored, -M), M) : contrib_uncensored;
  }
  if (want_rep == 1) {
    y_rep = normal_rng(rep_vector(mu, n), sigma);
  }
}
