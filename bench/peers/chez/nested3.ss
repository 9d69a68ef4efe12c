;;; nested3: the third derivative of a 5000-step loop, g(x) = acc after
;;; acc <- acc 0.9999 + sin(0.001 acc) from acc = x, at x = 1, by each of the
;;; eight nestings of derivative-F and derivative-R (FFF = three derivative-F).
;;; Not run by bench.py: by hand, against vlad's bench/peers/vlad/nested3.vlad
;;; (bench/peers/README.md, session 67):
;;;   scheme -q --script bench/peers/chez/run.ss compiled nested3 REPS
(define (g x)
  (let loop ((i 0) (acc x))
    (if (= i 5000) acc (loop (+ i 1) (d+ (d* acc 0.9999) (dsin (d* 0.001 acc)))))))
(define (d-of c) (if (char=? c #\F) derivative-F derivative-R))
(define (main args)
  (let ((reps (string->number (car args))))
    (for-each
     (lambda (v)
       (let ((d1 (d-of (string-ref v 0))) (d2 (d-of (string-ref v 1))) (d3 (d-of (string-ref v 2))))
         (bench (string-append "nested3-" v) reps 1 (lambda () ((d1 (d2 (d3 g))) 1.)))))
     '("FFF" "FFR" "FRF" "FRR" "RFF" "RFR" "RRF" "RRR"))
    (bench "nested4-FFFF" reps 1
           (lambda () ((derivative-F (derivative-F (derivative-F (derivative-F g)))) 1.)))))
