// A tied-embedding language model around one dsc.rms_norm: embedding,
// RMSNorm, logits against the embedding table, cross-entropy. Used by
// rms-norm.test against PyTorch.
module attributes {dsc.micro_batch = 2 : i64, dsc.seq_len = 4 : i64, dsc.vocab_size = 32 : i64, dsc.model_type = "gpt2"} {
func.func @forward(%wte: tensor<32x16xf32> {dsc.param = #dsc.param<"wte", normal, 0.02 : f64>},
                   %g: tensor<16xf32> {dsc.param = #dsc.param<"norm", ones, 0.0 : f64>},
                   %ids: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x32xf32>) {
  %e = dsc.embedding %wte, %ids : (tensor<32x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  %n = dsc.rms_norm %e, %g {epsilon = 1.0e-5 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %l = dsc.linear %n, %wte {transpose_w = true} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x32xf32>
}
}
