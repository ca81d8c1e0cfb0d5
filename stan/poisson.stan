// Weighted Poisson regression with log link: the appendix program of
// Savitsky, Hu & Williams (vector-weighted paper), rewritten vectorized.
// beta ~ MVN(0, diag(sigma) L L' diag(sigma)), sigma ~ student_t(3, 0, 1),
// L ~ LKJ(6). Intercept-only (K = 1, X = 1) is the simulation case.
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
  // Uncensored: sum_i alpha_i ll_i = (alpha .* y)' X beta - alpha' exp(X beta)
  //   - alpha' lgamma(y + 1); the first and last terms are fixed by the data.
  row_vector[K] ay_X = (alpha .* y_vec)' * X;
  real alpha_lgamma_y1 = dot_product(alpha, lgamma_y1);
  real sum_alpha = sum(alpha);
  int X_constant = dpsynth_rows_equal(X);  // intercept-only: one exp(eta) for all records
}
parameters {
  vector[K] beta;
  vector<lower=0>[K] sigma_beta;
  cholesky_factor_corr[K] L_beta;
}
model {
  L_beta ~ lkj_corr_cholesky(6);
  sigma_beta ~ student_t(3, 0, 1);
  beta ~ multi_normal_cholesky(rep_vector(0, K), diag_pre_multiply(sigma_beta, L_beta));
  if (censor == 1) {
    // poisson_log_lpmf(y_i | eta_i) = y_i eta_i - exp(eta_i) - lgamma(y_i + 1)
    vector[n] eta = X * beta;
    target += dpsynth_target(y_vec .* eta - exp(eta) - lgamma_y1, alpha, censor, M);
  } else {
    // The same sum with fewer autodiff nodes per record (about 2x faster).
    if (X_constant == 1) {
      target += ay_X * beta - sum_alpha * exp(X[1] * beta) - alpha_lgamma_y1;
    } else {
      vector[n] eta = X * beta;
      target += ay_X * beta - dot_product(alpha, exp(eta)) - alpha_lgamma_y1;
    }
  }
}
generated quantities {
  vector[want_log_lik ? n : 0] log_lik;
  vector[want_log_lik ? n : 0] log_lik_raw;
  array[want_rep ? n : 0] int y_rep;
  if (want_log_lik == 1) {
    vector[n] eta = X * beta;
    vector[n] ll = y_vec .* eta - exp(eta) - lgamma_y1;
    log_lik = dpsynth_contrib(ll, alpha, censor, M);
    log_lik_raw = alpha .* ll;
  }
  if (want_rep == 1) {
    y_rep = poisson_log_rng(X * beta);
  }
}
