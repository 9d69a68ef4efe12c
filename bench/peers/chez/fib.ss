;;; fib(30): the evaluator core, no AD.  ARGS: reps
(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
(define (main args) (bench "fib" (string->number (car args)) 1 (lambda () (fib 30))))
