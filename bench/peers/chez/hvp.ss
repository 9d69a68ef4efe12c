;;; Hessian-vector products.  ARGS:
;;;   quad reps K      f(x, y) = 2x^2 + 3xy + 4y^2 at (3 4) times (7 8), K calls, FR and RR
;;;   sum reps N MODE...  f(x) = sum_i x_i^3 over a list of N reals x_i = i/N, v = (1 ... 1),
;;;                    MODE FR (forward over reverse) or RR (reverse over reverse);
;;;                    value: (sum of the entries, last entry)
;;;   sum-primal reps N   f(x) alone
(define (hvp-FR f x v) (jvp-F (gradient-R f) x v))
(define (hvp-RR f x v) (vjp-R (gradient-R f) x v))   ; as vlad's prelude hvp-RR: v times the gradient's Jacobian
(define (quad l)
  (let ((x (car l)) (y (cadr l)))
    (d+ (d* 2.0 (d* x x)) (d+ (d* 3.0 (d* x y)) (d* 4.0 (d* y y))))))
(define (repeat-hvp h k)
  (let loop ((i k) (a 0.0) (b 0.0))
    (if (fx= i 0)
        (list (/ a k) (/ b k))
        (let ((r (h quad (list 3.0 4.0) (list 7.0 8.0))))
          (loop (fx- i 1) (+ a (car r)) (+ b (cadr r)))))))
(define (cubes x) (fold-left (lambda (acc xi) (d+ acc (d* (d* xi xi) xi))) 0.0 x))
(define (summary h) (list (fold-left + 0.0 h) (car (last-pair h))))
(define (main args)
  (let ((which (car args)) (reps (string->number (cadr args))) (n (string->number (caddr args))))
    (cond ((string=? which "quad")
           (bench "hvp-quad-FR" reps n (lambda () (repeat-hvp hvp-FR n)))
           (bench "hvp-quad-RR" reps n (lambda () (repeat-hvp hvp-RR n))))
          (else
           (let* ((xs (map (lambda (i) (/ (inexact i) n)) (iota n)))
                  (vs (map (lambda (x) 1.0) xs)))
             (if (string=? which "sum-primal")
                 (bench (string-append "hvp-sum-primal-" (number->string n)) reps 1 (lambda () (cubes xs)))
                 (for-each
                  (lambda (mode)
                    (bench (string-append "hvp-sum-" mode "-" (number->string n)) reps 1
                           (lambda () (summary ((if (string=? mode "FR") hvp-FR hvp-RR) cubes xs vs)))))
                  (cdddr args))))))))
