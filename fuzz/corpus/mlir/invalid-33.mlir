

func.func @lr_kind_string(%s: tensor<i64>) {
  // expected-error @+1 {{'dsc.lr_schedule' op attribute 'kind' failed to satisfy constraint: learning-rate scheduler, as DeepSpeed names them}}
  %lr = dsc.lr_schedule %s {kind = "WarmupLR", lr = 1.0e-3 : f64, warmup_min_lr = 0.0 : f64, warmup_max_lr = 1.0e-3 : f64, warmup_num_steps = 10 : i64, total_num_steps = 0 : i64, warmup_type = "cubic", warmup_min_ratio = 0.0 : f64, cos_min_ratio = 1.0e-4 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

