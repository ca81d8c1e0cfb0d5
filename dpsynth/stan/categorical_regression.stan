// Multinomial-logit regression for a categorical outcome on public levels (dpsynth's model,
// issue 29: a table's categorical columns): y_i in 1..L codes the i-th record's level among
// the L public levels (L = n_levels, passed as public data, never read from y), the first
// level the reference: P(y_i = l) = softmax(eta_i)[l], eta_i = [0, X_i beta] with beta a
// K x (L - 1) matrix (column l - 1 holds level l's coefficients against level 1).
// X has an intercept column first. The per-record log-likelihood is the categorical log
// mass, always <= 0 (supremum 0: centring "saturated" is the paper's mechanism).
// censor = 2 (smooth clamp) is accepted: a table's categorical column uses it by default
// (dpsynth.table_spec.CLAMP_DEFAULT).
// Priors (dpsynth's choice): every coefficient ~ normal(0, 2.5), as logistic_regression.stan.
functions {
#include dpsynth_functions.stan

  // The per-record log-likelihood, defined once:
  //   ll_i = categorical_logit_lpmf(y_i | eta_i) = eta_i[y_i] - log_sum_exp(eta_i),
  //   eta = [0, X beta] (n x L); a loop of plain arithmetic, no *_lpmf call per record.
  vector categorical_regression_record_log_lik(array[] int y, matrix X, matrix beta) {
    int n = size(y);
    matrix[n, cols(beta) + 1] eta = append_col(rep_vector(0, n), X * beta);
    vector[n] ll;
    for (i in 1:n) {
      ll[i] = eta[i, y[i]] - log_sum_exp(eta[i]);
    }
    return ll;
  }
}
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=2> censor;  // 2: the smooth clamp (dpsynth_functions.stan)
  real<lower=0> M;
  int<lower=0, upper=1> want_contrib;
  int<lower=0, upper=1> want_rep;
  vector[n] centre;  // record-only centring of ll (dpsynth's extension; 0 = the paper)
  int<lower=2> n_levels;  // L, the number of public levels
  array[n] int<lower=1, upper=n_levels> y;
  int<lower=1> K;
  matrix[n, K] X;
}
parameters {
  matrix[K, n_levels - 1] beta;
}
model {
  to_vector(beta) ~ normal(0, 2.5);
  target += dpsynth_centred_target(categorical_regression_record_log_lik(y, X, beta), centre,
                                   alpha, censor, M);
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] int y_rep;
  if (want_contrib == 1) {
    record_log_lik = categorical_regression_record_log_lik(y, X, beta);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    matrix[n, n_levels] eta = append_col(rep_vector(0, n), X * beta);
    for (i in 1:n) {
      y_rep[i] = categorical_logit_rng(eta[i]');
    }
  }
}
