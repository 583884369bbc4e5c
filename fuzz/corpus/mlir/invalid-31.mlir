

func.func @clip(%n: tensor<f32>) {
  // expected-error @+1 {{'dsc.clip_coefficient' op expects max_norm > 0}}
  %0 = dsc.clip_coefficient %n {max_norm = 0.0 : f64} : (tensor<f32>) -> tensor<f32>
  return
}

