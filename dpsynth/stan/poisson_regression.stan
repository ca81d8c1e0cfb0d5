// Poisson regression with log link for a table's count column (dpsynth's model, issue 29):
// the per-record log-likelihood, data and convention of poisson.stan, with independent
// weakly informative priors instead of the paper's hierarchical one (dpsynth's choice):
// intercept ~ normal(0, 5) (log rates of e^-10 to e^10), slopes ~ normal(0, 2.5) on the
// table's [0, 1] public design. At a table column's small epsilon the censored likelihood
// is weak, and the hierarchical prior's scale (sigma ~ student_t(3, 0, 1)) made a funnel:
// 9 to 22 divergent transitions at adapt_delta 0.8-0.95 on AER::DoctorVisits' illness.
functions {
#include dpsynth_functions.stan

  // The per-record log-likelihood, defined once:
  //   ll_i = poisson_log_lpmf(y_i | eta_i) = y_i eta_i - exp(eta_i) - lgamma(y_i + 1),
  // eta = X beta; lgamma_y1 = lgamma(y + 1) is passed in, computed once from the data.
  vector poisson_record_log_lik(vector y, vector lgamma_y1, matrix X, vector beta) {
    vector[rows(y)] eta = X * beta;
    return y .* eta - exp(eta) - lgamma_y1;
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
  array[n] int<lower=0> y;
  int<lower=1> K;
  matrix[n, K] X;
}
transformed data {
  vector[n] y_vec = to_vector(y);
  vector[n] lgamma_y1 = lgamma(y_vec + 1);
  // Uncensored: sum_i alpha_i ll_i = (alpha .* y)' X beta - alpha' exp(X beta)
  //   - alpha' lgamma(y + 1); the first and last terms are fixed by the data.
  row_vector[K] ay_X = (alpha .* y_vec)' * X;
  real alpha_lgamma_y1 = dot_product(alpha, lgamma_y1);
  real sum_alpha = sum(alpha);
  int X_constant = dpsynth_rows_equal(X);  // intercept-only: one exp(eta) for all records
  real alpha_centre = dot_product(alpha, centre);  // centred censoring (dpsynth's extension)
  int U = dpsynth_n_unique(y);
  // Censored (either clamp), intercept-only, weights and centres depending on y alone:
  // one term per distinct outcome (dpsynth_outcome_groups), exact.
  matrix[U, 5] groups = dpsynth_outcome_groups(y, alpha, centre);
  int grouped = X_constant == 1 && U > 0 && min(col(groups, 5)) == 1;
  vector[U] y_g = col(groups, 1);
  vector[U] count_g = col(groups, 2);
  vector[U] lgamma_y1_g = lgamma(y_g + 1);
  matrix[U, K] X_g = rep_matrix(n > 0 ? X[1] : rep_row_vector(0, K), U);
}
parameters {
  vector[K] beta;
}
model {
  beta[1] ~ normal(0, 5);
  if (K > 1) {
    beta[2:K] ~ normal(0, 2.5);  // an intercept-only design (K = 1) has no slopes
  }
  if (censor >= 1 && grouped == 1) {
    target += dot_product(count_g, dpsynth_centred_contrib(
                poisson_record_log_lik(y_g, lgamma_y1_g, X_g, beta),
                col(groups, 4), col(groups, 3), censor, M));
  } else if (censor >= 1) {
    target += dpsynth_centred_target(poisson_record_log_lik(y_vec, lgamma_y1, X, beta), centre,
                                     alpha, censor, M);
  } else {
    // The same sum, dpsynth_centred_target(poisson_record_log_lik(...), centre, alpha, 0, M),
    // regrouped (alpha' centre is a constant, kept so that target = prior + sum(contrib))
    // with fewer autodiff nodes per record (about 2x faster); checked against the
    // per-record terms by tests/test_models.py.
    if (X_constant == 1) {
      target += ay_X * beta - sum_alpha * exp(X[1] * beta) - alpha_lgamma_y1 - alpha_centre;
    } else {
      target += ay_X * beta - dot_product(alpha, exp(X * beta)) - alpha_lgamma_y1 - alpha_centre;
    }
  }
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] int y_rep;
  if (want_contrib == 1) {
    record_log_lik = poisson_record_log_lik(y_vec, lgamma_y1, X, beta);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    y_rep = poisson_log_rng(X * beta);
  }
}
