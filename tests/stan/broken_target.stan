// Test-only program that breaks the censoring convention on purpose: its generated
// `contrib` is clamped to [-M, M] as the convention asks, but its target adds the
// weighted terms UNclamped. dpsynth.program_checks.check_censored must refuse it:
// the target is not the prior plus the sum of `contrib`.
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
  mu ~ normal(0, 10);
  target += sum(alpha .* (-0.5 * square(y - mu) - 0.5 * log(2 * pi())));  // not clamped
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] real y_rep;
  if (want_contrib == 1) {
    record_log_lik = -0.5 * square(y - mu) - 0.5 * log(2 * pi());
    contrib_uncensored = alpha .* record_log_lik;
    contrib = censor == 1 ? fmin(fmax(contrib_uncensored, -M), M) : contrib_uncensored;
  }
  if (want_rep == 1) {
    y_rep = normal_rng(rep_vector(mu, n), 1);
  }
}
