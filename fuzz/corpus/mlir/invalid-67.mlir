

func.func @lr_warmup_type(%s: tensor<i64>) {
  // expected-error @+2 {{expected ::mlir::dsc::WarmupType to be one of: log, linear}}
  // expected-error @+1 {{failed to parse Dsc_WarmupTypeAttr parameter 'value'}}
  %lr = dsc.lr_schedule %s {kind = #dsc<lr_schedule WarmupLR>, lr = 1.0e-3 : f64, warmup_min_lr = 0.0 : f64, warmup_max_lr = 1.0e-3 : f64, warmup_num_steps = 10 : i64, total_num_steps = 0 : i64, warmup_type = #dsc<warmup cubic>, warmup_min_ratio = 0.0 : f64, cos_min_ratio = 1.0e-4 : f64} : (tensor<i64>) -> tensor<f32>
  return
}
