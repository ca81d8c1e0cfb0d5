// Beta synthesizer of Hu, Williams & Savitsky (supplement S2):
// y_i ~ Beta(lambda * phi, lambda * (1 - phi)), phi ~ Beta(1, 1),
// lambda ~ Pareto(0.1, 1.5); weighted and optionally censored likelihood.
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
  vector<lower=0, upper=1>[n] y;
}
transformed data {
  // beta_lpdf(y | a, b) = (a - 1) log y + (b - 1) log(1 - y) - lbeta(a, b)
  // = Z * [a - 1, b - 1, lbeta(a, b)]': one matrix-vector product per
  // gradient, no per-record lgamma calls (several times faster than a loop).
  matrix[n, 3] Z = append_col(append_col(log(y), log1m(y)), rep_vector(-1, n));
  // Uncensored: sum_i alpha_i ll_i = (alpha' Z) * coef, three sufficient statistics.
  row_vector[3] alpha_Z = alpha' * Z;
  // Censored: the weighted contributions alpha_i ll_i = (diag(alpha) Z) * coef directly,
  // saving one autodiff node per record.
  matrix[n, 3] Z_alpha = diag_pre_multiply(alpha, Z);
}
parameters {
  real<lower=0, upper=1> phi;
  real<lower=0.1> lambda;
}
transformed parameters {
  real<lower=0> beta1 = lambda * phi;
  real<lower=0> beta2 = lambda * (1 - phi);
}
model {
  vector[3] coef = [beta1 - 1, beta2 - 1, lbeta(beta1, beta2)]';
  phi ~ beta(1, 1);
  lambda ~ pareto(0.1, 1.5);
  if (censor == 1) {
    target += sum(fmin(fmax(Z_alpha * coef, -M), M));  // Eq. (3.5), as dpsynth_target
  } else {
    target += alpha_Z * coef;  // equals dpsynth_target(Z * coef, alpha, 0, M)
  }
}
generated quantities {
  vector[want_log_lik ? n : 0] log_lik;
  vector[want_log_lik ? n : 0] log_lik_raw;
  array[want_rep ? n : 0] real y_rep;
  if (want_log_lik == 1) {
    vector[n] ll = Z * [beta1 - 1, beta2 - 1, lbeta(beta1, beta2)]';
    log_lik = dpsynth_contrib(ll, alpha, censor, M);
    log_lik_raw = alpha .* ll;
  }
  if (want_rep == 1) {
    y_rep = beta_rng(rep_vector(beta1, n), rep_vector(beta2, n));
  }
}
