// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// ZeRO-Offload's copies between device and host memory keep the tensor's
// type and name a transfer group >= 0.

func.func @to_host_changes_type(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dsc.to_host' op copies between memories keep the type, got 'tensor<8xf32>' -> 'tensor<8xf16>'}}
  %h = dsc.to_host %g : (tensor<8xf32>) -> tensor<8xf16>
  return
}

// -----

func.func @to_device_changes_shape(%h: tensor<8xf32>) {
  // expected-error @+1 {{'dsc.to_device' op copies between memories keep the type, got 'tensor<8xf32>' -> 'tensor<4xf32>'}}
  %d = dsc.to_device %h : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @negative_group(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dsc.to_host' op transfer group must be >= 0, got -1}}
  %h = dsc.to_host %g {group = -1} : (tensor<8xf32>) -> tensor<8xf32>
  return
}
