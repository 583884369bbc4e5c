

func.func @global_norm_empty() {
  // expected-error @+1 {{'dsc.global_norm' op expects at least one input}}
  %0 = dsc.global_norm : () -> tensor<f32>
  return
}

