// Logistic regression for a binary outcome (dpsynth's model, issue 29: a table's binary
// columns): y_i in {0, 1}, logit P(y_i = 1) = X_i beta; X has an intercept column first.
// The per-record log-likelihood is the Bernoulli log mass, always <= 0 (its supremum over
// beta is 0, so the saturated centre is 0: centring "saturated" is the paper's mechanism).
// Priors (dpsynth's choice): beta ~ normal(0, 2.5), the weakly informative scale for
// logistic coefficients on standardized inputs (Gelman, Jakulin, Pittau & Su 2008).
functions {
#include dpsynth_functions.stan

  // The per-record log-likelihood, defined once:
  //   ll_i = bernoulli_logit_lpmf(y_i | eta_i) = y_i eta_i - log(1 + exp(eta_i)), eta = X beta.
  vector logistic_regression_record_log_lik(vector y, matrix X, vector beta) {
    vector[rows(y)] eta = X * beta;
    return y .* eta - log1p_exp(eta);
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
  array[n] int<lower=0, upper=1> y;
  int<lower=1> K;
  matrix[n, K] X;
}
transformed data {
  vector[n] y_vec = to_vector(y);
}
parameters {
  vector[K] beta;
}
model {
  beta ~ normal(0, 2.5);
  target += dpsynth_centred_target(logistic_regression_record_log_lik(y_vec, X, beta), centre,
                                   alpha, censor, M);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] int y_rep;
  if (want_contrib == 1) {
    record_log_lik = logistic_regression_record_log_lik(y_vec, X, beta);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    y_rep = bernoulli_logit_rng(X * beta);
  }
}
