module attributes {dsc.micro_batch = 1 : i64, dsc.seq_len = 4 : i64, dsc.vocab_size = 256 : i64, dsc.grad_accum = 1 : i64} {
  func.func @micro_step(%ids: tensor<1x4xi32> {dsc.state = #dsc.state<input_ids, "input_ids">}, %t: tensor<1x4xi32> {dsc.state = #dsc.state<targets, "targets">}) -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">}) {
    %l = dsc.fill {value = 1.0 : f64} : () -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @apply_step(%s: i64 {dsc.state = #dsc.state<step, "step">}) -> (tensor<f32> {dsc.state = #dsc.state<output, "lr">}, tensor<f32> {dsc.state = #dsc.state<output, "grad_norm">}) {
    %l = dsc.fill {value = 1.0 : f64} : () -> tensor<f32>
    return %l, %l : tensor<f32>, tensor<f32>
  }
}
