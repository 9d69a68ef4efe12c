;;; meta: a gradient through an optimiser's steps. The loss sum c_i x_i^2
;;; (c = 1..10) after 100 steps of gradient descent at rate eta from x = 1,
;;; each step's gradient by gradient-F or gradient-R, differentiated in eta at
;;; 0.01 by derivative-F or derivative-R: -400 sum c^2 (1 - 2 eta c)^199 =
;;; -7.66968.... Not run by bench.py: by hand, against bench/peers/vlad/meta.vlad
;;; (bench/peers/README.md, session 67):
;;;   scheme -q --script bench/peers/chez/run.ss compiled meta REPS
(define cs '(1. 2. 3. 4. 5. 6. 7. 8. 9. 10.))
(define (loss x)
  (let loop ((c cs) (x x) (acc 0.))
    (if (null? c) acc (loop (cdr c) (cdr x) (d+ acc (d* (car c) (sqr (car x))))))))
(define (descend grad eta)
  (let ((g (grad loss)))
    (let loop ((i 0) (x (map (lambda (c) 1.) cs)))
      (if (= i 100) (loss x) (loop (+ i 1) (map (lambda (xi gi) (d- xi (d* eta gi))) x (g x)))))))
(define (main args)
  (let ((reps (string->number (car args))))
    (for-each
     (lambda (v)
       (let ((d (if (char=? (string-ref v 0) #\F) derivative-F derivative-R))
             (grad (if (char=? (string-ref v 1) #\F) gradient-F gradient-R)))
         (bench (string-append "meta-" v) reps 1 (lambda () ((d (lambda (eta) (descend grad eta))) 0.01)))))
     '("FF" "FR" "RF" "RR"))))
