// Negative binomial regression with log link for a table's count column (dpsynth's model,
// issue 29): the per-record log-likelihood, data and convention of negbin.stan, with the
// priors of poisson_regression.stan (dpsynth's choice): intercept ~ normal(0, 5), slopes
// ~ normal(0, 2.5) on the table's [0, 1] public design, phi ~ gamma(2, 0.1) as negbin.stan.
// negbin.stan's beta ~ normal(0, 10) let a weak censored likelihood wander over log rates
// of +-30: at epsilon 0.3 on AER::DoctorVisits' illness, max R-hat 1.018 (bulk ESS 140).
// phi_fixed = 1 fixes the dispersion at the PUBLIC value phi_known instead of fitting it
// (dpsynth's extension: Model.with_known_dispersion); phi_fixed = 0, the default the
// library passes, fits it.
functions {
#include dpsynth_functions.stan

  // The per-record log-likelihood, defined once:
  //   ll_i = neg_binomial_2_log_lpmf(y_i | eta_i, phi)
  //        = lgamma(y_i + phi) - lgamma(phi) - lgamma(y_i + 1)
  //          + y_i (eta_i - log(exp(eta_i) + phi)) + phi (log phi - log(exp(eta_i) + phi)),
  // eta = X beta; lgamma_y1 = lgamma(y + 1) is passed in, computed once from the data.
  vector negbin_record_log_lik(vector y, vector lgamma_y1, matrix X, vector beta, real phi) {
    vector[rows(y)] eta = X * beta;
    real log_phi = log(phi);
    vector[rows(y)] log_mu_phi = log_sum_exp_vec(eta, log_phi);
    return lgamma(y + phi) - lgamma(phi) - lgamma_y1
           + y .* (eta - log_mu_phi) + phi * (log_phi - log_mu_phi);
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
  int<lower=0, upper=1> phi_fixed;  // 1: phi is the public phi_known, not fitted
  real<lower=0> phi_known;  // used only when phi_fixed = 1
}
transformed data {
  vector[n] y_vec = to_vector(y);
  vector[n] lgamma_y1 = lgamma(y_vec + 1);
  // For the uncensored sum (see the model block).
  row_vector[K] ay_X = (alpha .* y_vec)' * X;
  real alpha_lgamma_y1 = dot_product(alpha, lgamma_y1);
  real alpha_centre = dot_product(alpha, centre);  // centred censoring (dpsynth's extension)
  real sum_alpha = sum(alpha);
  real alpha_y = dot_product(alpha, y_vec);
  int X_constant = dpsynth_rows_equal(X);
  // Distinct outcomes y_u with summed weights alpha_u:
  // sum_i alpha_i lgamma(y_i + phi) = sum_u alpha_u lgamma(y_u + phi).
  int U = dpsynth_n_unique(y);
  vector[U] y_u;
  vector[U] alpha_u = rep_vector(0, U);
  {
    array[n] int ord = sort_indices_asc(y);
    int u = 0;
    for (j in 1:n) {
      if (j == 1 || y[ord[j]] != y[ord[j - 1]]) {
        u += 1;
        y_u[u] = y[ord[j]];
      }
      alpha_u[u] += alpha[ord[j]];
    }
  }
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
  real<lower=0> phi_free;  // phi when fitted; its prior alone when phi_fixed = 1
}
transformed parameters {
  real<lower=0> phi = phi_fixed == 1 ? phi_known : phi_free;
}
model {
  beta[1] ~ normal(0, 5);
  if (K > 1) {
    beta[2:K] ~ normal(0, 2.5);  // an intercept-only design (K = 1) has no slopes
  }
  phi_free ~ gamma(2, 0.1);
  if (censor >= 1 && grouped == 1) {
    target += dot_product(count_g, dpsynth_centred_contrib(
                negbin_record_log_lik(y_g, lgamma_y1_g, X_g, beta, phi),
                col(groups, 4), col(groups, 3), censor, M));
  } else if (censor >= 1) {
    target += dpsynth_centred_target(negbin_record_log_lik(y_vec, lgamma_y1, X, beta, phi),
                                     centre, alpha, censor, M);
  } else {
    // The same sum, dpsynth_centred_target(negbin_record_log_lik(...), centre, alpha, 0, M),
    // regrouped (alpha' centre is a constant, kept so that target = prior + sum(contrib))
    // with log(exp(eta) + phi) = log(phi) + log1p_exp(eta - log(phi)):
    // sum_i alpha_i [lgamma(y_i + phi) - (y_i + phi) log(exp(eta_i) + phi)]
    //   + (alpha .* y)' X beta + sum(alpha) (phi log(phi) - lgamma(phi)) - alpha' lgamma(y + 1)
    // Records are grouped by outcome for the lgamma term; an intercept-only design has one
    // log(exp(eta) + phi) for all records. Checked against the per-record terms by
    // tests/test_models.py.
    real log_phi = log(phi);
    real shared = ay_X * beta + sum_alpha * (phi * log_phi - lgamma(phi)) - alpha_lgamma_y1
                  - alpha_centre
                  + dot_product(alpha_u, lgamma(y_u + phi));
    if (X_constant == 1) {
      real eta1 = X[1] * beta;
      target += shared - (alpha_y + phi * sum_alpha) * (log_phi + log1p_exp(eta1 - log_phi));
    } else {
      vector[n] eta = X * beta;
      target += shared - dot_product(alpha .* (y_vec + phi), log_phi + log1p_exp(eta - log_phi));
    }
  }
}
generated quantities {
  vector[want_contrib ? n : 0] contrib;
  vector[want_contrib ? n : 0] contrib_uncensored;
  vector[want_contrib ? n : 0] record_log_lik;
  array[want_rep ? n : 0] int y_rep;
  if (want_contrib == 1) {
    record_log_lik = negbin_record_log_lik(y_vec, lgamma_y1, X, beta, phi);
    contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);
    contrib_uncensored = alpha .* (record_log_lik - centre);
  }
  if (want_rep == 1) {
    y_rep = neg_binomial_2_log_rng(X * beta, phi);
  }
}
