// Test-only program, NOT private under add-remove neighbours (where n is private): its
// prior scale grows with the number of records. Refused ('prior') under add-remove.
functions {
#include dpsynth_functions.stan
}
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=1> censor;
  real<lower=0> M;
  int<lower=0, upper=1> want_contrib;
  int<lower=0, upper=1> want_rep;
  vector[n] y;
}
transformed data {
  vector[n] z = 0.5 * square(y);  // record by record
}
parameters {
  real mu;
}
model {
  vector[n] ll = -z + mu * y - 0.5 * square(mu) - 0.5 * log(2 * pi());
  mu ~ normal(0, 10 + n);
  target += dpsynth_target(ll, alpha, censor, M);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = -z + mu * y - 0.5 * square(mu) - 0.5 * log(2 * pi());
    contrib = dpsynth_contrib(record_log_lik, alpha, censor, M);
    contrib_uncensored = alpha .* record_log_lik;
  }
  if (want_rep == 1) {
    y_rep = normal_rng(rep_vector(mu, n), 1);
  }
}
