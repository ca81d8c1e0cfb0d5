// The censoring paper's own Stan script for the beta synthesizer (supplement S2),
// transcribed verbatim for benchmarks/bench_paper_script.py. Not a dpsynth model:
// it does not follow the convention of stan/ (no want_contrib, log_lik in the
// supplement's sense). M = epsilon / 2.
functions{

  real betawt_lpdf(vector outcome, real beta1, real beta2, vector alpha, int n, real M)
  {
    real check_term;
    real update_term;
    check_term = 0.0;
    for( i in 1:n )
    {
      update_term = alpha[i] * beta_lpdf(outcome[i] | beta1, beta2);
      check_term = check_term + fmax(fmin(update_term, M), -M);
    }
    return check_term;
  }

  real betawt_i_lpdf(real outcome_i, real beta1, real beta2, real alpha_i, real M){
    real check_term;
    real update_term;
    update_term = alpha_i * beta_lpdf(outcome_i | beta1, beta2);
    check_term = fmax(fmin(update_term, M), -M);
    return check_term;
  }

  real betawt_i_noM_lpdf(real outcome_i, real beta1, real beta2, real alpha_i){
    real check_term;
    check_term = alpha_i * beta_lpdf(outcome_i | beta1, beta2);
    return check_term;
  }

} /* end function{} block */

data {
  int<lower=1> n; // number of observations
  vector[n] outcome; // Response variable
  vector<lower=0>[n] alpha; // observation-indexed (privacy) weights
  real<lower=0> M; //censoring threshold
}

parameters{
  real<lower=0,upper=1> phi;
  real<lower=0.1> lambda;
}

transformed parameters{
  real<lower=0> beta1 = lambda * phi;
  real<lower=0> beta2 = lambda * (1 - phi);
}

model{
  phi ~ beta(1, 1); // uniform on phi, could drop
  lambda ~ pareto(0.1, 1.5);

  target += betawt_lpdf(outcome | beta1, beta2, alpha, n, M);
} /* end model{ } block */

generated quantities{
  vector[n] log_lik;
  vector[n] log_lik_noM;

  for (i in 1:n) {
    log_lik[i] = betawt_i_lpdf(outcome[i] | beta1, beta2, alpha[i], M);
    log_lik_noM[i] = betawt_i_noM_lpdf(outcome[i] | beta1, beta2, alpha[i]);
  }
}
