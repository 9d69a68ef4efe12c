;;; ad.ss: a nestable forward- and reverse-mode AD library for Chez Scheme, of
;;; the kind Siskind & Pearlmutter ported to some twenty systems for their
;;; benchmarks ("Nesting forward-mode AD in a functional framework", HOSC 2008;
;;; "Efficient implementation of a higher-order language with built-in AD",
;;; AD 2016).  Plain R6RS/Chez; no macros beyond define-record-type.
;;;
;;; Forward mode: dual numbers  <e, primal, tangent>.
;;; Reverse mode: tape nodes    <e, primal, factors, parents, fanout, sensitivity>,
;;;   built as the primal runs; the reverse phase first counts each node's
;;;   fan-out, then pushes sensitivities so that every node propagates once,
;;;   after all its uses have been accumulated.
;;; Every derivative operator takes a fresh tag e (an integer, the nesting
;;; depth); a value's tag tells which derivative it belongs to, and an operation
;;; on values of different tags treats the older (smaller) tag as a constant,
;;; which is what prevents perturbation confusion.  Primals, tangents, factors
;;; and sensitivities are themselves values of this library, computed with the
;;; lifted operations, so all four nestings (FF, FR, RF, RR) work to any depth.
;;;
;;; The lifted arithmetic is exported under the names d+ d- d* d/ dsqrt dexp dlog
;;; dsin dcos d= d< d> d<= d>= dzero? dpositive? dnegative?; the derivative
;;; operators are derivative-F derivative-R gradient-F gradient-R, and
;;; primal* strips every tag from a value.
;;;
;;; The file is a sequence of definitions only; bench/peers/chez/run.ss splices
;;; it, with a workload, into one (let () ...) so that Chez compiles the whole
;;; program as a unit (or interprets it, for the interpreted measurements).

(define *e* 0)

(define-record-type dual (fields e p t) (nongenerative) (sealed #t))
(define-record-type tape
  (fields e p factors parents (mutable fanout) (mutable sens))
  (nongenerative) (sealed #t))

(define (new-tape e p factors parents) (make-tape e p factors parents 0 0))

;; the untagged real underneath any number of tags
(define (primal* x)
  (cond ((dual? x) (primal* (dual-p x)))
        ((tape? x) (primal* (tape-p x)))
        (else x)))

;; f: the real function; df: its derivative, written with lifted operations
(define (lift-real->real f df)
  (letrec ((self
            (lambda (x)
              (cond ((dual? x)
                     (make-dual (dual-e x) (self (dual-p x)) (d* (df (dual-p x)) (dual-t x))))
                    ((tape? x)
                     (new-tape (tape-e x) (self (tape-p x)) (list (df (tape-p x))) (list x)))
                    (else (f x))))))
    self))

;; f: the real function; df1, df2: its partial derivatives, with lifted operations
(define (lift-real*real->real f df1 df2)
  (letrec ((self
            (lambda (x1 x2)
              ;; x1 carries the newest tag e; x2 is a constant with respect to e
              (define (fwd1 e)
                (let ((p1 (dual-p x1)))
                  (make-dual e (self p1 x2) (d* (df1 p1 x2) (dual-t x1)))))
              (define (fwd2 e)
                (let ((p2 (dual-p x2)))
                  (make-dual e (self x1 p2) (d* (df2 x1 p2) (dual-t x2)))))
              (define (rev1 e)
                (let ((p1 (tape-p x1)))
                  (new-tape e (self p1 x2) (list (df1 p1 x2)) (list x1))))
              (define (rev2 e)
                (let ((p2 (tape-p x2)))
                  (new-tape e (self x1 p2) (list (df2 x1 p2)) (list x2))))
              (cond
               ((dual? x1)
                (let ((e1 (dual-e x1)))
                  (cond ((dual? x2)
                         (let ((e2 (dual-e x2)))
                           (cond ((fx< e1 e2) (fwd2 e2))
                                 ((fx< e2 e1) (fwd1 e1))
                                 (else
                                  (let ((p1 (dual-p x1)) (p2 (dual-p x2)))
                                    (make-dual e1 (self p1 p2)
                                               (d+ (d* (df1 p1 p2) (dual-t x1))
                                                   (d* (df2 p1 p2) (dual-t x2)))))))))
                        ((tape? x2)
                         (let ((e2 (tape-e x2))) (if (fx< e1 e2) (rev2 e2) (fwd1 e1))))
                        (else (fwd1 e1)))))
               ((tape? x1)
                (let ((e1 (tape-e x1)))
                  (cond ((dual? x2)
                         (let ((e2 (dual-e x2))) (if (fx< e1 e2) (fwd2 e2) (rev1 e1))))
                        ((tape? x2)
                         (let ((e2 (tape-e x2)))
                           (cond ((fx< e1 e2) (rev2 e2))
                                 ((fx< e2 e1) (rev1 e1))
                                 (else
                                  (let ((p1 (tape-p x1)) (p2 (tape-p x2)))
                                    (new-tape e1 (self p1 p2)
                                              (list (df1 p1 p2) (df2 p1 p2))
                                              (list x1 x2)))))))
                        (else (rev1 e1)))))
               ((dual? x2) (fwd2 (dual-e x2)))
               ((tape? x2) (rev2 (tape-e x2)))
               (else (f x1 x2))))))
    self))

(define (lift-real^n->boolean f)
  (lambda xs (apply f (map primal* xs))))

(define d+ (lift-real*real->real + (lambda (x1 x2) 1) (lambda (x1 x2) 1)))
(define d- (lift-real*real->real - (lambda (x1 x2) 1) (lambda (x1 x2) -1)))
(define d* (lift-real*real->real * (lambda (x1 x2) x2) (lambda (x1 x2) x1)))
(define d/ (lift-real*real->real
            /
            (lambda (x1 x2) (d/ 1 x2))
            (lambda (x1 x2) (d- 0 (d/ x1 (d* x2 x2))))))
(define dsqrt (lift-real->real sqrt (lambda (x) (d/ 1 (d* 2 (dsqrt x))))))
(define dexp (lift-real->real exp (lambda (x) (dexp x))))
(define dlog (lift-real->real log (lambda (x) (d/ 1 x))))
(define dsin (lift-real->real sin (lambda (x) (dcos x))))
(define dcos (lift-real->real cos (lambda (x) (d- 0 (dsin x)))))
(define (d= x1 x2) (= (primal* x1) (primal* x2)))
(define (d< x1 x2) (< (primal* x1) (primal* x2)))
(define (d> x1 x2) (> (primal* x1) (primal* x2)))
(define (d<= x1 x2) (<= (primal* x1) (primal* x2)))
(define (d>= x1 x2) (>= (primal* x1) (primal* x2)))
(define (dzero? x) (zero? (primal* x)))
(define (dpositive? x) (positive? (primal* x)))
(define (dnegative? x) (negative? (primal* x)))

;;; Forward mode ---------------------------------------------------------------

;; f: R -> R; the tangent of (f x) under a fresh tag
(define (derivative-F f)
  (lambda (x)
    (set! *e* (fx+ *e* 1))
    (let* ((e *e*)
           (y (f (make-dual e x 1)))
           (dy (if (and (dual? y) (fx= (dual-e y) e)) (dual-t y) 0)))
      (set! *e* (fx- *e* 1))
      dy)))

(define (replace-ith x i xi)
  (if (fx= i 0) (cons xi (cdr x)) (cons (car x) (replace-ith (cdr x) (fx- i 1) xi))))

;; f: list of reals -> R; one forward pass per coordinate
(define (gradient-F f)
  (lambda (x)
    (let loop ((i 0) (l x))
      (if (null? l)
          '()
          (cons ((derivative-F (lambda (xi) (f (replace-ith x i xi)))) (car l))
                (loop (fx+ i 1) (cdr l)))))))

;; f: R^n -> R, direction v: the directional derivative (one forward pass)
(define (jvp-F f x v)
  (set! *e* (fx+ *e* 1))
  (let* ((e *e*)
         (y (f (map (lambda (xi vi) (make-dual e xi vi)) x v)))
         (dy (cond ((and (dual? y) (fx= (dual-e y) e)) (dual-t y))
                   ((pair? y) (map (lambda (yi) (if (and (dual? yi) (fx= (dual-e yi) e)) (dual-t yi) 0)) y))
                   (else 0))))
    (set! *e* (fx- *e* 1))
    dy))

;;; Reverse mode ---------------------------------------------------------------

(define (determine-fanout! t)
  (let ((n (fx+ (tape-fanout t) 1)))
    (tape-fanout-set! t n)
    (when (fx= n 1) (for-each determine-fanout! (tape-parents t)))))

(define (reverse-phase! s t)
  (tape-sens-set! t (d+ (tape-sens t) s))
  (let ((n (fx- (tape-fanout t) 1)))
    (tape-fanout-set! t n)
    (when (fx= n 0)
      (let ((s (tape-sens t)))
        (let loop ((fs (tape-factors t)) (ps (tape-parents t)))
          (unless (null? fs)
            (reverse-phase! (d* s (car fs)) (car ps))
            (loop (cdr fs) (cdr ps))))))))

;; f: list of reals -> R; gradient by one forward sweep and one reverse sweep
(define (gradient-R f)
  (lambda (x)
    (set! *e* (fx+ *e* 1))
    (let* ((e *e*)
           (xr (map (lambda (xi) (new-tape e xi '() '())) x))
           (y (f xr)))
      (when (and (tape? y) (fx= (tape-e y) e))
        (determine-fanout! y)
        (reverse-phase! 1 y))
      (set! *e* (fx- *e* 1))
      (map tape-sens xr))))

;; f: list of reals -> list of reals (or a real); v shaped like (f x): v times
;; the Jacobian of f at x, by one forward sweep and one reverse sweep seeded
;; with v (every output's fan-out counted before any is swept)
(define (vjp-R f x v)
  (set! *e* (fx+ *e* 1))
  (let* ((e *e*)
         (xr (map (lambda (xi) (new-tape e xi '() '())) x))
         (y (f xr))
         (ys (if (pair? y) y (list y)))
         (vs (if (pair? y) v (list v)))
         (own? (lambda (yi) (and (tape? yi) (fx= (tape-e yi) e)))))
    (for-each (lambda (yi) (when (own? yi) (determine-fanout! yi))) ys)
    (for-each (lambda (yi vi) (when (own? yi) (reverse-phase! vi yi))) ys vs)
    (set! *e* (fx- *e* 1))
    (map tape-sens xr)))

;; f: R -> R
(define (derivative-R f)
  (lambda (x) (car ((gradient-R (lambda (l) (f (car l)))) (list x)))))

;;; Small vector library on lists (lifted) --------------------------------------

(define (v+ u v) (map d+ u v))
(define (v- u v) (map d- u v))
(define (k*v k v) (map (lambda (x) (d* k x)) v))
(define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (d+ acc (d* (car u) (car v)))))))
(define (magnitude-squared v) (dot v v))
(define (magnitude v) (dsqrt (magnitude-squared v)))
(define (distance u v) (magnitude (v- u v)))
;; The benchmark's gradient descent (Siskind & Pearlmutter's saddle/particle),
;; used by chez/saddle.ss and chez/particle.ss: step size eta from 1e-5, doubled
;; after 10 improving steps, halved after a step that does not improve; stop
;; when |grad| <= 1e-5 or a step moves <= 1e-5.
(define (multivariate-argmin gradient f x)
  (let ((g (gradient f)))
    (let loop ((x x) (fx (f x)) (gx (g x)) (eta 1e-5) (i 0))
      (cond ((d<= (magnitude gx) 1e-5) x)
            ((fx= i 10) (loop x fx gx (d* 2.0 eta) 0))
            (else
             (let ((x-prime (v- x (k*v eta gx))))
               (if (d<= (distance x x-prime) 1e-5)
                   x
                   (let ((fx-prime (f x-prime)))
                     (if (d< fx-prime fx)
                         (loop x-prime fx-prime (g x-prime) eta (fx+ i 1))
                         (loop x fx gx (d/ eta 2.0) 0))))))))))
(define (sqr x) (d* x x))

;;; Timing harness ----------------------------------------------------------------

;; CPU time of the process (the machines these run on may be shared)
(define (now-seconds)
  (let ((t (current-time 'time-process)))
    (+ (time-second t) (/ (time-nanosecond t) 1e9))))

(define (median xs)
  (let* ((s (list-sort < xs)) (n (length s)))
    (if (odd? n)
        (list-ref s (quotient n 2))
        (/ (+ (list-ref s (- (quotient n 2) 1)) (list-ref s (quotient n 2))) 2))))

(define (flatten x)
  (cond ((pair? x) (append (flatten (car x)) (flatten (cdr x))))
        ((null? x) '())
        (else (list (primal* x)))))

;; run thunk reps times; print "RESULT name median-seconds-per-unit v1 v2 ..."
;; where a unit is one call of thunk divided by per (e.g. 10000 for per-call µs)
(define (bench name reps per thunk)
  (let loop ((i 0) (times '()) (v #f))
    (if (fx= i reps)
        (begin
          (display "RESULT ") (display name) (display " ")
          (display (inexact (/ (median times) per)))
          (for-each (lambda (x) (display " ") (display (inexact x))) (flatten v))
          (newline)
          (flush-output-port (current-output-port)))
        (let* ((t0 (now-seconds)) (v (thunk)) (t1 (now-seconds)))
          (loop (fx+ i 1) (cons (- t1 t0) times) v)))))

;; The driver of the nested workloads (saddle, particle): ARGS are
;; WHICH REPS VARIANT ..., WHICH being NAME (the full solve, (solve outer inner))
;; or NAME-grad (one outer gradient, (solve-grad outer inner)), and each VARIANT
;; two letters (F or R) picking the outer and inner gradient.
(define (grad-of name) (if (char=? name #\F) gradient-F gradient-R))
(define (nested-main name solve solve-grad args)
  (let ((which (car args)) (reps (string->number (cadr args))))
    (for-each
     (lambda (v)
       (let ((outer (grad-of (string-ref v 0))) (inner (grad-of (string-ref v 1))))
         (bench (string-append which "-" v) reps 1
                (if (string=? which name)
                    (lambda () (solve outer inner))
                    (lambda () (solve-grad outer inner))))))
     (cddr args))))
