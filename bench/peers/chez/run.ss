;;; run.ss: run one Chez workload.
;;;   scheme -q --script bench/peers/chez/run.ss MODE WORKLOAD [ARG ...]
;;; MODE is `compiled` (optimize-level 3, the whole program compiled as one
;;; unit), `loaded` (each top-level form of ad.ss and of the workload compiled
;;; by itself at Chez's default, safe, optimize level, as `load` or `scheme
;;; --script` compiles a file: no inlining across definitions) or `interpreted`
;;; (Chez's interpreter, `interpret`).  WORKLOAD names
;;; bench/peers/chez/WORKLOAD.ss; ad.ss and it are spliced into one
;;; (let () ...) whose last expression is (main ARGS), ARGS being the remaining
;;; command-line arguments as strings (`loaded`: defined at top level, then
;;; main called).  Each workload prints
;;; "RESULT name seconds value ..." lines (seconds = median over repetitions).
(define args (command-line-arguments))
(define here
  (let* ((s (car (command-line)))
         (i (let loop ((i (- (string-length s) 1)))
              (cond ((< i 0) #f) ((char=? (string-ref s i) #\/) i) (else (loop (- i 1)))))))
    (if i (substring s 0 (+ i 1)) "./")))
(define (read-forms file)
  (with-input-from-file file
    (lambda () (let loop ((acc '())) (let ((x (read))) (if (eof-object? x) (reverse acc) (loop (cons x acc))))))))
(unless (>= (length args) 2)
  (display "usage: run.ss compiled|loaded|interpreted WORKLOAD [ARG ...]\n") (exit 2))
(define mode (car args))
(define program
  `(let ()
     ,@(read-forms (string-append here "../ad.ss"))
     ,@(read-forms (string-append here (cadr args) ".ss"))
     (main ',(cddr args))))
(cond ((string=? mode "compiled")
       (parameterize ((optimize-level 3) (generate-procedure-source-information #f))
         ((compile `(lambda () ,program)))))
      ((string=? mode "loaded")
       (let ((forms (append (read-forms (string-append here "../ad.ss"))
                            (read-forms (string-append here (cadr args) ".ss"))))
             (main-args (cddr args)))
         (for-each eval forms)
         ((eval 'main) main-args)))
      ((string=? mode "interpreted") (interpret program))
      (else (display "mode must be compiled, loaded or interpreted\n") (exit 2)))
