;;; particle: choose the control w of a charge so that a particle, moved by
;;; Euler steps (dt = 0.1) in the potential of two charges, lands at x = 0;
;;; the inner gradient is of the potential at each step, the outer of the
;;; squared landing x with respect to w, by the benchmark's gradient descent.
;;; Variants FF FR RF RR (outer mode first). multivariate-argmin is in ../ad.ss.
(define (naive-euler gradient w)
  (let* ((charges (list (list 10.0 (d- 10.0 w)) (list 10.0 0.0)))
         (x-initial (list 0.0 8.0))
         (xdot-initial (list 0.75 0.0))
         (delta-t 0.1)
         (p (lambda (x)
              (fold-right d+ 0.0 (map (lambda (c) (d/ 1.0 (distance x c))) charges)))))
    (let loop ((x x-initial) (xdot xdot-initial))
      (let* ((xddot (k*v -1.0 ((gradient p) x)))
             (x-new (v+ x (k*v delta-t xdot))))
        (if (dpositive? (cadr x-new))
            (loop x-new (v+ xdot (k*v delta-t xddot)))
            (let* ((delta-t-f (d/ (d- 0.0 (cadr x)) (cadr xdot)))
                   (x-t-f (v+ x (k*v delta-t-f xdot))))
              (sqr (car x-t-f))))))))
(define (particle outer inner)
  (car (multivariate-argmin outer (lambda (w) (naive-euler inner (car w))) (list 0.0))))
;; one outer gradient, through one whole simulation, at w = (0)
(define (particle-grad outer inner)
  ((outer (lambda (w) (naive-euler inner (car w)))) (list 0.0)))
;; ARGS: particle|particle-grad reps variant ... (nested-main in ad.ss)
(define (main args) (nested-main "particle" particle particle-grad args))
