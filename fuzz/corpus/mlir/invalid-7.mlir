

func.func @layer_norm_eps(%x: tensor<2x24xf32>, %g: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.layer_norm' op expects epsilon > 0}}
  %0 = dsc.layer_norm %x, %g, %g {epsilon = 0.0 : f64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<2x24xf32>
  return
}

