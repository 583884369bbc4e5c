

func.func @dropout_rate(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dsc.dropout' op expects rate in [0, 1), got 1.000000e+00}}
  %0 = dsc.dropout %x {rate = 1.0 : f64, stream = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

