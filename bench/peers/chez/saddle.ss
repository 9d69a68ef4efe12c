;;; saddle: min over x of max over y of s^2 + t^2 - u^2 - v^2, from (1 1)/(1 1),
;;; by the benchmark's gradient descent (multivariate-argmin, in ../ad.ss) nested in
;;; itself; the outer gradient differentiates through the whole inner solve.
;;; Variants FF FR RF RR (outer mode first).
(define (multivariate-argmax gradient f x)
  (multivariate-argmin gradient (lambda (x) (d- 0.0 (f x))) x))
(define (multivariate-max gradient f x) (f (multivariate-argmax gradient f x)))
(define (saddle outer inner)
  (let* ((start (list 1.0 1.0))
         (f (lambda (x1 y1 x2 y2) (d- (d+ (sqr x1) (sqr y1)) (d+ (sqr x2) (sqr y2)))))
         (x* (multivariate-argmin
              outer
              (lambda (x)
                (multivariate-max inner (lambda (y) (f (car x) (cadr x) (car y) (cadr y))) start))
              start))
         (y* (multivariate-argmax
              inner (lambda (y) (f (car x*) (cadr x*) (car y) (cadr y))) start)))
    (list x* y*)))
;; one outer gradient, through one whole inner solve, at x = (1 1)
(define (saddle-grad outer inner)
  (let ((start (list 1.0 1.0))
        (f (lambda (x1 y1 x2 y2) (d- (d+ (sqr x1) (sqr y1)) (d+ (sqr x2) (sqr y2))))))
    ((outer (lambda (x)
              (multivariate-max inner (lambda (y) (f (car x) (cadr x) (car y) (cadr y))) start)))
     start)))
;; ARGS: saddle|saddle-grad reps variant ... (nested-main in ad.ss)
(define (main args) (nested-main "saddle" saddle saddle-grad args))
