// Test-only program that breaks the censoring convention on purpose: its target clamps
// every weighted term to [-M, M], but its generated `contrib` is NOT clamped.
// dpsynth.program_checks.check_censored must refuse it: `contrib` leaves [-M, M].
// Model: y_i ~ normal(mu, 1), mu ~ normal(0, 10). Self-contained (no #include).
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=1> censor;
  real<lower=0> M;
  int<lower=0, upper=1> want_contrib;
  int<lower=0, upper=1> want_rep;
  vector[n] y;
}
parameters {
  real mu;
}
model {
  vector[n] wll = alpha .* (-0.5 * square(y - mu) - 0.5 * log(2 * pi()));
  mu ~ normal(0, 10);
  target += censor == 1 ? sum(fmin(fmax(wll, -M), M)) : sum(wll);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = -0.5 * square(y - mu) - 0.5 * log(2 * pi());
    contrib_uncensored = alpha .* record_log_lik;
    contrib = contrib_uncensored;  // not clamped
  }
  if (want_rep == 1) {
    y_rep = normal_rng(rep_vector(mu, n), 1);
  }
}
