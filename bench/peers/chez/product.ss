;;; d/dx prod_{i=1..N} (1 + x/i) at x = 0.5, by (non-tail) recursion.
;;; ARGS: reps N MODE...   MODE: R (reverse), F (forward), primal (f alone)
(define (main args)
  (let* ((reps (string->number (car args))) (n (string->number (cadr args))))
    (define (prod x i) (if (fx> i n) 1.0 (d* (d+ 1.0 (d/ x i)) (prod x (fx+ i 1)))))
    (define (f x) (prod x 1))
    (for-each
     (lambda (mode)
       (bench (string-append "product-" mode "-" (number->string n)) reps 1
              (cond ((string=? mode "R") (lambda () ((derivative-R f) 0.5)))
                    ((string=? mode "F") (lambda () ((derivative-F f) 0.5)))
                    (else (lambda () (f 0.5))))))
     (cddr args))))
