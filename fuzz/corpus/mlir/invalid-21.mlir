

func.func @mlm_prob(%ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.mlm_mask' op expects mask_prob in (0, 1), got 0.000000e+00}}
  %a, %b = dsc.mlm_mask %ids {mask_prob = 0.0 : f64, mask_token_id = 3 : i64, stream = 1 : i64, vocab_size = 50 : i64} : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xi32>)
  return
}

