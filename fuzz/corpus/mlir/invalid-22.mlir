

func.func @mlm_token(%ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.mlm_mask' op mask_token_id 50 is outside the vocabulary [0, 50)}}
  %a, %b = dsc.mlm_mask %ids {mask_prob = 0.15 : f64, mask_token_id = 50 : i64, stream = 1 : i64, vocab_size = 50 : i64} : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xi32>)
  return
}

