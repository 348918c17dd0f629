;; linear.wat: engine.js's nn.Linear, y = x W^T + b, as a WebAssembly kernel with 128-bit SIMD (four float32 lanes).
;; engine.js holds it compiled, in base64 (LINEAR_WASM); `python web/build_wasm.py` compiles this file and writes it
;; there, and a test checks that the two agree.
;;
;; Everything lives in the memory engine.js gives (its `memory` import), as float32, row after row: x (rows, n),
;; W (m, n) as PyTorch stores it, b (m) and y (rows, m); x, W, b and y are byte addresses, and b is 0 for a layer
;; without a bias (engine.js never stores anything at address 0). n must be a multiple of 4 (engine.js checks: if
;; any layer's n is not, every layer stays in JavaScript). Each dot product adds four lanes at a time in float32, as
;; PyTorch's vectorised kernels add in float32, so results agree with PyTorch to float32 rounding, not bit for bit
;; (the JavaScript path adds in float64).
(module
  (import "env" "memory" (memory 1))

  ;; The four lanes of `v` added: (v0 + v1) + (v2 + v3).
  (func $sum (param $v v128) (result f32)
    (f32.add (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
             (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  ;; b[o], or 0 without a bias.
  (func $bias (param $b i32) (param $o i32) (result f32)
    (if (result f32) (local.get $b)
      (then (f32.load (i32.add (local.get $b) (i32.shl (local.get $o) (i32.const 2)))))
      (else (f32.const 0))))

  ;; Two to five rows of x at once, one output at a time: each four numbers of W, once loaded, are multiplied into
  ;; every row, so W is read once for all of them. Beam search's hypotheses, the encoder's positions. With fewer
  ;; than five rows the last row's work is done again (the same sums, stored again in the same place).
  (func (export "fiveRows")
    (param $x i32) (param $w i32) (param $b i32) (param $y i32) (param $n i32) (param $m i32) (param $rows i32)
    (local $bytes i32) (local $x1 i32) (local $x2 i32) (local $x3 i32) (local $x4 i32)
    (local $y1 i32) (local $y2 i32) (local $y3 i32) (local $y4 i32) (local $ybytes i32)
    (local $o i32) (local $row i32) (local $j i32) (local $wv v128) (local $bo f32) (local $at i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $a4 v128)
    (local.set $bytes (i32.shl (local.get $n) (i32.const 2)))                ;; a row of x or W, in bytes
    (local.set $ybytes (i32.shl (local.get $m) (i32.const 2)))               ;; a row of y
    ;; row r of x and y, or the row before it where r >= rows
    (local.set $x1 (select (i32.add (local.get $x) (local.get $bytes)) (local.get $x)
                           (i32.gt_u (local.get $rows) (i32.const 1))))
    (local.set $x2 (select (i32.add (local.get $x1) (local.get $bytes)) (local.get $x1)
                           (i32.gt_u (local.get $rows) (i32.const 2))))
    (local.set $x3 (select (i32.add (local.get $x2) (local.get $bytes)) (local.get $x2)
                           (i32.gt_u (local.get $rows) (i32.const 3))))
    (local.set $x4 (select (i32.add (local.get $x3) (local.get $bytes)) (local.get $x3)
                           (i32.gt_u (local.get $rows) (i32.const 4))))
    (local.set $y1 (select (i32.add (local.get $y) (local.get $ybytes)) (local.get $y)
                           (i32.gt_u (local.get $rows) (i32.const 1))))
    (local.set $y2 (select (i32.add (local.get $y1) (local.get $ybytes)) (local.get $y1)
                           (i32.gt_u (local.get $rows) (i32.const 2))))
    (local.set $y3 (select (i32.add (local.get $y2) (local.get $ybytes)) (local.get $y2)
                           (i32.gt_u (local.get $rows) (i32.const 3))))
    (local.set $y4 (select (i32.add (local.get $y3) (local.get $ybytes)) (local.get $y3)
                           (i32.gt_u (local.get $rows) (i32.const 4))))
    (loop $outputs
      (local.set $row (i32.add (local.get $w) (i32.mul (local.get $o) (local.get $bytes))))   ;; W's row o
      (local.set $a0 (v128.const i32x4 0 0 0 0))
      (local.set $a1 (v128.const i32x4 0 0 0 0))
      (local.set $a2 (v128.const i32x4 0 0 0 0))
      (local.set $a3 (v128.const i32x4 0 0 0 0))
      (local.set $a4 (v128.const i32x4 0 0 0 0))
      (local.set $j (i32.const 0))
      (loop $inner
        (local.set $wv (v128.load (i32.add (local.get $row) (local.get $j))))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (local.get $wv) (v128.load (i32.add (local.get $x) (local.get $j))))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (local.get $wv) (v128.load (i32.add (local.get $x1) (local.get $j))))))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (local.get $wv) (v128.load (i32.add (local.get $x2) (local.get $j))))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (local.get $wv) (v128.load (i32.add (local.get $x3) (local.get $j))))))
        (local.set $a4 (f32x4.add (local.get $a4)
          (f32x4.mul (local.get $wv) (v128.load (i32.add (local.get $x4) (local.get $j))))))
        (br_if $inner (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 16))) (local.get $bytes))))
      (local.set $bo (call $bias (local.get $b) (local.get $o)))
      (local.set $at (i32.shl (local.get $o) (i32.const 2)))                  ;; y[r][o] at y_r + 4 o
      (f32.store (i32.add (local.get $y) (local.get $at)) (f32.add (call $sum (local.get $a0)) (local.get $bo)))
      (f32.store (i32.add (local.get $y1) (local.get $at)) (f32.add (call $sum (local.get $a1)) (local.get $bo)))
      (f32.store (i32.add (local.get $y2) (local.get $at)) (f32.add (call $sum (local.get $a2)) (local.get $bo)))
      (f32.store (i32.add (local.get $y3) (local.get $at)) (f32.add (call $sum (local.get $a3)) (local.get $bo)))
      (f32.store (i32.add (local.get $y4) (local.get $at)) (f32.add (call $sum (local.get $a4)) (local.get $bo)))
      (br_if $outputs (i32.lt_u (local.tee $o (i32.add (local.get $o) (i32.const 1))) (local.get $m)))))

  ;; One row of x, one output at a time: W is read row after row, in the order it lies in memory.
  (func (export "oneRow") (param $x i32) (param $w i32) (param $b i32) (param $y i32) (param $n i32) (param $m i32)
    (local $bytes i32) (local $o i32) (local $row i32) (local $j i32) (local $a v128)
    (local.set $bytes (i32.shl (local.get $n) (i32.const 2)))
    (local.set $row (local.get $w))
    (loop $outputs
      (local.set $a (v128.const i32x4 0 0 0 0))
      (local.set $j (i32.const 0))
      (loop $inner
        (local.set $a (f32x4.add (local.get $a) (f32x4.mul (v128.load (i32.add (local.get $x) (local.get $j)))
                                                           (v128.load (i32.add (local.get $row) (local.get $j))))))
        (br_if $inner (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 16))) (local.get $bytes))))
      (f32.store (i32.add (local.get $y) (i32.shl (local.get $o) (i32.const 2)))
        (f32.add (call $sum (local.get $a)) (call $bias (local.get $b) (local.get $o))))
      (local.set $row (i32.add (local.get $row) (local.get $bytes)))
      (br_if $outputs (i32.lt_u (local.tee $o (i32.add (local.get $o) (i32.const 1))) (local.get $m)))))
)
