

func.func @reduce_to(%x: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.reduce_to' op result [7] does not broadcast to input [2, 8, 24]}}
  %0 = dsc.reduce_to %x : (tensor<2x8x24xf32>) -> tensor<7xf32>
  return
}

