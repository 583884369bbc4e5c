

module {
  func.func @micro_step(%x: tensor<2xf32> {dsc.state = #dsc.state<param, "x">}) -> () {
    // expected-error @+1 {{the runtime has no buffers of element type 'f64'}}
    %y = dsc.fill {value = 0.0 : f64} : () -> tensor<2xf64>
    return
  }
  func.func @apply_step() -> () {
    return
  }
}
