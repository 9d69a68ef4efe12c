//! The tier of compiled code for numeric procedures (`src/jit`): a program
//! must behave exactly as in the evaluator alone, in its values, the steps
//! it counts, its `--max-steps` and `--max-depth` limits, and its errors'
//! messages and traces (the code gives up and the evaluator runs the call
//! again wherever the evaluator would do something else); and the code must
//! in fact be compiled and run (else the comparison would test nothing).

mod common;

use vlad::eval::GState;
use vlad::toplevel::Session;
use vlad::value::Value;

/// Numeric programs: recursion in and out of tail position, loops, calls
/// between procedures and of small ones run in place, integers overflowing
/// into big ones, exact quotients, reals and integers mixed, comparisons of
/// the two, NaN and -0.0, booleans, operands of other kinds, and lists
/// taken apart (`car`, `cdr`, `null?`, `pair?`), holding numbers or other
/// values, returned, and misused.
const PROGRAMS: &[&str] = &[
    "(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
     (fib 20) (fib 12.0) (fib #t) (fib 1) (fib '())",
    // tail recursion (a loop), with an accumulator of either kind
    "(define (sum n acc) (if (= n 0) acc (sum (- n 1) (+ acc n))))
     (sum 1000 0) (sum 1000 0.5) (sum 100 #f) (sum 10 4611686018427387903)",
    // overflow into big integers, in a loop and in recursion
    "(define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))
     (define (pow2 n acc) (if (= n 0) acc (pow2 (- n 1) (* 2 acc))))
     (fact 10) (fact 20) (fact 25) (pow2 62 1) (pow2 63 1) (pow2 70 1.0)",
    // exact quotients and real ones
    "(define (q n d) (if (= n 0) d (q (- n 1) (/ d 2))))
     (q 3 1) (q 3 1.0) (q 0 7) (q 5 0.0)",
    // named lets, as loops in tail position and as values
    "(define (tri n) (let loop ((i n) (acc 0)) (if (<= i 0) acc (loop (- i 1) (+ acc i)))))
     (define (nest n) (+ 1 (let outer ((i n) (s 0))
                             (if (= i 0) s
                                 (outer (- i 1) (+ s (let inner ((j i) (t 0)) (if (= j 0) t (inner (- j 1) (+ t j))))))))))
     (tri 100) (tri 10.5) (nest 20) (nest 0) (nest 3.0)",
    // calls between procedures, and of small ones run in place
    "(define (sq x) (* x x))
     (define (f x y) (+ (sq x) (* 3 y)))
     (define (g n) (if (< n 1) (f n 2.5) (+ (g (- n 1)) (f n n))))
     (define (h n) (if (> n 5) (g n) (h (+ n 1))))
     (g 10) (h 0) (h 0.5) (g #t)",
    // comparisons of integers with reals (the general path), NaN, -0.0
    "(define (cmp a b) (if (< a b) 1 (if (= a b) 0 -1)))
     (define (neg x) (- 0.0 x))
     (define (nan x) (/ x x))
     (cmp 1 2) (cmp 2.5 2.5) (cmp 1 2.0) (cmp 3.0 1) (cmp (nan 0.0) 1.0) (neg 0.0) (neg -0.0) (cmp (nan 0.0) (nan 0.0))",
    // booleans as values and in conditions; anything but #f is true
    "(define (pick c a b) (if c a b))
     (define (both a b) (if a (if b #t #f) #f))
     (pick #t 1 2) (pick #f 1 2) (pick 0 1 2) (pick 0.0 1 2) (both #t 3) (both 1 #f)",
    // deep recursion, past the depth limits below
    "(define (down n) (if (= n 0) 0 (+ 1 (down (- n 1)))))
     (define (deep n) (if (= n 0) 0.0 (+ 0.5 (deep (- n 1)))))
     (down 1000) (deep 200) (down 30)",
    // mutual recursion in tail position
    "(define (ev? n) (if (= n 0) #t (od? (- n 1))))
     (define (od? n) (if (= n 0) #f (ev? (- n 1))))
     (ev? 100) (od? 7) (ev? 3.0) (ev? #t)",
    // the one-argument primitives compiled code computes, on reals and integers
    "(define (un x) (+ (real x) (+ (sqrt x) (+ (exp x) (+ (log x) (+ (sin x) (cos x)))))))
     (define (walk n x) (if (= n 0) x (walk (- n 1) (* 0.5 (+ x (un x))))))
     (un 2.0) (un 4) (un 0.0) (un -1.0) (un -0.0) (un 1e308) (walk 20 0.5) (walk 5 3) (un #t) (sqrt 16)",
    // named lets' loops compiled on their own (in a procedure called once,
    // at the top level, as values, nested, in branches, reading the
    // procedure's variables, calling procedures), and those that cannot be
    // (a list read, more values read than the code takes) or give up
    // part of the way (overflow, an operand of another kind)
    "(define (integrate n) (let ((h (/ 1.0 (real n))))
       (let loop ((i 0) (s 0.0)) (if (= i n) (* h s) (loop (+ i 1) (+ s (* h (real i))))))))
     (define (sq x) (* x x))
     (define (twice n) (* 2 (let loop ((i 0) (s 0)) (if (> i n) s (loop (+ i 1) (+ s (sq i)))))))
     (define (grid n) (let outer ((i 0) (acc 0))
       (if (= i n) acc (outer (+ i 1) (+ acc (let inner ((j 0) (t 0)) (if (= j i) t (inner (+ j 1) (+ t j)))))))))
     (define (pick c n) (if c (let up ((i 0)) (if (< i n) (up (+ i 1)) i)) (let down ((i n)) (if (> i 0) (down (- i 1)) (- i 1)))))
     (define (pow2 n) (let loop ((i 0) (acc 1)) (if (= i n) acc (loop (+ i 1) (* 2 acc)))))
     (define (walk xs) (let loop ((k 0) (s 0)) (if (= k 50) (+ s (car xs)) (loop (+ k 1) (+ s k)))))
     (define (many a b c d e f g h i j k l m n o p q)
       (let loop ((r 0) (s 0)) (if (= r 40) s (loop (+ r 1) (+ s (+ a (+ b (+ c (+ d (+ e (+ f (+ g (+ h (+ i (+ j (+ k (+ l (+ m (+ n (+ o (+ p q)))))))))))))))))))))
     (define (mixed n x) (let loop ((i 0) (s x)) (if (= i n) s (loop (+ i 1) (+ s (if (= i 30) #t 1))))))
     (integrate 200) (integrate 0) (twice 100) (grid 30) (pick #t 60) (pick #f 60)
     (pow2 40) (pow2 70) (walk (list 5 6)) (many 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17)
     (mixed 20 0) (mixed 40 0.5)
     (let loop ((i 0) (acc 0)) (if (= i 300) acc (loop (+ i 1) (+ acc i))))
     (+ 1 (let loop ((i 0) (acc 0.5)) (if (>= i 300) acc (loop (+ i 1) (* acc 1.01)))))",
    // integers compared with reals (exactly: near 2^53 the compiled code
    // gives up), sums of the two kinds, `sqrt` of exact integers (perfect
    // squares exact), and the sign tests, on NaN, -0.0 and a boolean
    "(define (cmp a b) (if (< a b) -1 (if (= a b) 0 (if (> a b) 1 (if (<= a b) 2 (if (>= a b) 3 4))))))
     (define (mix a b) (+ (cmp a b) (+ 1 (* a (sqrt b)))))
     (define (root n) (+ 0 (sqrt n)))
     (define (signs x) (+ (if (zero? x) 1 0) (+ (if (positive? x) 10 0) (if (negative? x) 100 0))))
     (define (count-signs n acc) (if (= n 0) acc (count-signs (- n 1) (+ acc (signs (- n 5))))))
     (cmp 1 1.5) (cmp 2 1.5) (cmp 3 3.0) (cmp 3.0 3) (cmp 1 (/ 0.0 0.0)) (cmp (/ 1.0 0.0) 5) (cmp -0.0 0)
     (cmp 9007199254740992 9007199254740992.0) (cmp 9007199254740993 9007199254740992.0)
     (cmp -9007199254740993 -9007199254740992.0) (cmp 4611686018427387903 4.611686018427388e18)
     (mix 2 4) (mix 2.0 9) (mix 3 2.0) (mix 0.5 0)
     (root 0) (root 1) (root 16) (root 17) (root 4503599627370496) (root 9007199254740993) (root -4) (root 2.25) (root #t)
     (signs 0) (signs 3) (signs -3) (signs 0.0) (signs -0.0) (signs 2.5) (signs -1e-300) (signs (/ 0.0 0.0)) (signs #f)
     (count-signs 10 0) (count-signs 20 0.5)
     (define (angle y x) (+ 0 (atan y x)))
     (angle 1 1) (angle 1.0 -1) (angle 0 -1.0) (angle -0.0 -1.0) (angle 0 0) (angle (/ 0.0 0.0) 1)
     (angle (/ 1.0 0.0) 3) (angle 4611686018427387903 1) (angle #t 1) (angle 1 12345678901234567890)",
    // lists walked: summed, counted, their tails and elements returned;
    // elements of other kinds passed on, tested, computed with; improper
    // lists and non-lists taken apart
    "(define (sum l) (let loop ((l l) (s 0)) (if (null? l) s (loop (cdr l) (+ s (car l))))))
     (define (dot u v) (if (null? u) 0 (+ (* (car u) (car v)) (dot (cdr u) (cdr v)))))
     (define (len l) (if (pair? l) (+ 1 (len (cdr l))) 0))
     (define (drop l k) (if (= k 0) l (drop (cdr l) (- k 1))))
     (define (last l) (if (null? (cdr l)) (car l) (last (cdr l))))
     (define (count-true l n) (if (null? l) n (count-true (cdr l) (if (car l) (+ n 1) n))))
     (define xs (list 1 2.5 3 4 5 6 7 8 9 10))
     (sum xs) (sum (list 4611686018427387903 1)) (sum (list 1 #t)) (sum (cons 1 2)) (sum 3) (sum '())
     (dot xs xs) (dot xs (list 1 2)) (dot (list 1 2) xs) (dot (list (list 1)) (list 2))
     (len xs) (len (list car (lambda (x) x) (list 1 2) '() #f)) (len 5) (len (cons 1 2))
     (drop xs 3) (drop (list 1 2 3) 3) (len (drop (list 1 (lambda (x) x) 3) 1)) (drop (list 1) 2)
     (last xs) (pair? (last (list 1 car))) (last (list 1 (list 2 3))) (last '())
     (count-true (list #f 0 '() car #f (list 1)) 0) (count-true (cons #f #t) 0)",
    // procedures holding a loop, run in place in callers that are not
    // compiled (they build lists), run by their own compiled code: on
    // numbers, on values of other kinds, and on lists too short
    "(define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))
     (define (mag v) (sqrt (dot v v)))
     (define (dist u v) (mag (list (- (car u) (car v)) (- (cadr u) (cadr v)))))
     (define (mags k acc) (if (= k 0) acc (mags (- k 1) (cons (mag (list (real k) 4)) acc))))
     (define (dists k acc) (if (= k 0) acc (dists (- k 1) (cons (dist (list k 1.5) (list 0 (real k))) acc))))
     (mags 6 '()) (dists 6 '()) (mags 3 (list (mag (list 1 #t)))) (dot (list 1 2) (list 3))
     (mag (list 3 4)) (mag (list 2 2)) (dists 2 (list (dist (list 1 2) (list 3))))
     (define gv (list 5 12))
     (define (magg k acc) (if (= k 0) acc (magg (- k 1) (cons (mag gv) (cons (mag '(6 8)) acc)))))
     (define (magc v) (let ((f (lambda (k) (cons k (mag v))))) (list (f 1) (f 2))))
     (magg 3 '()) (magc (list 1 1)) (magc (list 1 #f)) (magc '())",
    // lists made: by `cons` and `list`, and by walks (`map` of a
    // one-argument primitive, of a global's procedure, and of a closure
    // made where it is called, reading that procedure's variables; `map2` of
    // an arithmetic primitive and of such a closure), nested, returned whole
    // or in part, walked again; and the walks the evaluator runs instead:
    // lists of other lengths, improper ones, non-lists, elements of other
    // kinds (closures, which compiled code does not make), a walk's
    // procedure giving up, AD values
    "(define (v- u v) (map2 - u v))
     (define (k*v k v) (map (lambda (x) (* k x)) v))
     (define (sq x) (* x x))
     (define (sqs v) (map sq v))
     (define (roots v) (map sqrt v))
     (define (axpy a x y) (map2 (lambda (xi yi) (+ (* a xi) yi)) x y))
     (define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))
     (define (dist u v) (sqrt (dot (v- u v) (v- u v))))
     (define (pairs v) (map (lambda (x) (cons x (list x (* 2 x)))) v))
     (define (outer u v) (map (lambda (x) (map (lambda (y) (* x y)) v)) u))
     (define (shadow k v) (let ((f (lambda (x) (+ k x)))) (let ((k (map f v))) (map f k))))
     (define (step x g eta) (v- x (k*v eta g)))
     (define (descend x k) (if (= k 0) x (descend (step x (k*v 2.0 x) 0.1) (- k 1))))
     (define (range n acc) (if (= n 0) acc (range (- n 1) (cons n acc))))
     (define (firsts l) (map car l))
     (define (tails l) (if (null? l) '() (cons l (tails (cdr l)))))
     (define (ids v) (map (lambda (x) x) v))
     (define (rep x k) (append (let loop ((i k) (acc '())) (if (<= i 0) acc (loop (- i 1) (cons x acc)))) '()))
     (v- (list 1 2.5 3) (list 0.5 1 1)) (v- '() '()) (v- '() (list 1)) (v- (list 1 2) (list 1 2 3))
     (v- (list 1 2 3) (list 1 2)) (v- (list 1 2) (cons 1 2)) (v- (cons 1 2) (list 1 2)) (v- 5 '())
     (v- (list 1 #t) (list 1 2)) (v- (list 4611686018427387903) (list -1)) (v- (list 1 2) (list 2 0.5))
     (k*v 2 (list 1 2.5 -3)) (k*v 0.5 '()) (k*v #t (list 1)) (k*v 2 (list 4611686018427387903)) (k*v 2 (list (list 1) 1))
     (sqs (list 1 2 3.5)) (sqs (list 1 (list 2))) (roots (list 4 2.0 -1.0 16)) (roots (list #f))
     (axpy 2 (list 1 2) (list 10 20)) (axpy 0.5 (list 1) (list 1 2)) (axpy 1 (list 1 2) (list 1))
     (dist (list 3 4) (list 0 0)) (dist (list 1.5 2 -1) (list 0 0 1)) (pairs (list 1 2.5)) (pairs '())
     (outer (list 1 2) (list 3 4 5)) (outer (list 1 #t) (list 1)) (shadow 10 (list 1 2))
     (descend (list 1.0 -2.0) 30) (descend (list 1 2) 3) (dot (range 50 '()) (range 50 '()))
     (firsts (list (list 1 2) (list 3))) (tails (list 1 2 3)) (pair? (cadr (tails (list 1 car)))) (pair? (cdr (ids (list 1 car)))) (ids (list 1 (list 2.5 #t) '())) (rep 2.5 40) (rep (list 1) 3) (pair? (rep car 2))
     ((gradient-R (lambda (x) (dot (k*v 3.0 x) x))) (list 1.0 2.0))
     ((gradient-F (lambda (x) (dot (v- x (list 1.0 1.0)) x))) (list 2.0 3.0))",
    // loops calling procedures their frames hold (through the evaluator):
    // a descent calling its function and a gradient, on reals, exact
    // numbers, AD values (the loop under a gradient), and callees that fail:
    // an error in one, one that is not a procedure, one returning a value
    // of another kind, one that writes, one called in tail position, and
    // closures taken out of a list
    "(define (descend f g x eta n)
       (let loop ((x x) (i 0) (best (f x)))
         (if (= i n) (list x best)
             (let* ((gx (g x)) (x1 (map2 - x (map (lambda (d) (* eta d)) gx))) (fx1 (f x1)))
               (if (< fx1 best) (loop x1 (+ i 1) fx1) (loop x (+ i 1) best))))))
     (define (quad x) (+ (* (car x) (car x)) (* 3 (* (cadr x) (cadr x)))))
     (define (dquad x) (list (* 2 (car x)) (* 6 (cadr x))))
     (descend quad (gradient-R quad) (list 1.0 2.0) 0.1 40)
     (descend quad dquad (list 1 2) 1/10 20)
     (descend quad car (list 1.0 2.0) 0.1 5)
     (descend quad 5 (list 1.0 2.0) 0.1 3)
     (descend quad (lambda (x) (if (< (car x) 0.5) (car '()) (dquad x))) (list 1.0 2.0) 0.1 30)
     (descend (lambda (x) (list (quad x))) dquad (list 1.0 2.0) 0.1 3)
     (descend (lambda (x) (quad (cons (write (car x)) (cdr x)))) dquad (list 1.0 2.0) 0.25 8)
     ((gradient-R (lambda (x) (cadr (descend quad dquad x 0.1 10)))) (list 1.0 2.0))
     ((derivative-F (lambda (e) (cadr (descend quad dquad (list 1.0 2.0) e 10)))) 0.1)
     (define (last-call f n) (let loop ((i 0)) (if (= i n) (f i) (loop (+ i 1)))))
     (last-call (lambda (i) (* i i)) 50) (last-call car 3)
     (define (apply-all fs x) (let loop ((fs fs) (acc x)) (if (null? fs) acc (loop (cdr fs) ((car fs) acc)))))
     (apply-all (list (lambda (x) (* 2 x)) (lambda (x) (+ x 1)) sqrt) 12)
     (define (twice-n f n x) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (f (f x))))))
     (twice-n (lambda (x) (* 1.5 x)) 20 1.0) (twice-n (lambda (x) (* 2 x)) 40 1) (twice-n (lambda (x) (twice-n cos 2 x)) 5 0.5)",
    // loops calling procedures under derivatives, computing with the
    // levels' reals that the calls return (a comparison, a product; lists
    // of them made), giving up there (`sqrt` of one) after the calls
    // recorded on a tape, or after a call gave way to the transform (the
    // gradient-F of a function whose sweeps are lost); nested
    "(define (desc f g x eta n)
       (let loop ((x x) (i 0) (best (f x)))
         (if (= i n) (list x best)
             (let* ((gx (g x)) (x1 (map2 - x (map (lambda (d) (* eta d)) gx))) (fx1 (f x1)))
               (if (< fx1 best) (loop x1 (+ i 1) fx1) (loop x (+ i 1) best))))))
     (define (walk f n)
       (let loop ((i 0) (acc (f 1.0))) (if (= i n) acc (loop (+ i 1) (if (= i 3) (sqrt (f acc)) (f acc))))))
     (define (h v) (- (* (car v) (cadr v)) (/ (cadr v) (car v))))
     ((derivative-R (lambda (w) (cadr (desc h (gradient-F h) (list 1.0 2.0) 0.01 25)))) 0.5)
     ((derivative-R (lambda (w) (cadr (desc (lambda (v) (car (list 2))) (gradient-F (lambda (v) (car (list 2)))) (list 1.0 2.0) 0.1 25)))) 2.0)
     ((gradient-R (lambda (l) (cadr (desc (lambda (v) (* (car l) (+ (* (car v) (car v)) (cadr v)))) (lambda (v) (list (* 2 (car v)) 1)) (list 1.0 2.0) 1/8 10)))) (list 3))
     ((gradient-R (lambda (l) (car (car (desc (lambda (v) (* (car v) (cadr v))) (lambda (v) (list (cadr v) (car v))) l 0.1 5))))) (list 1.0 2.0))
     ((derivative-R (lambda (w) (walk (lambda (a) (* a w)) 5))) 2.0)
     ((derivative-F (lambda (w) (walk (lambda (a) (* a w)) 5))) 2)
     ((derivative-R (lambda (u) ((derivative-F (lambda (w) (* u (walk (lambda (a) (* a w)) 5)))) u))) 1.5)",
    // loops calling closures whose lambdas' bodies compiled code runs in
    // place of the calls (a closure calling a let-bound lambda and another
    // closure it captured, as the saddle's objective does); the slot later
    // holding a closure of another lambda, or the closure capturing another
    // procedure, or itself; under derivatives (arithmetic on the levels'
    // reals the closure captured); misused (a captured value that is not a
    // pair, or not a number)
    "(define (iterate f x n) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (f x)))))
     (define (make c) (let* ((f (lambda (u v) (* u v))) (h (lambda (y) (f y c)))) (lambda (x) (- 0.0 (h x)))))
     (define (wrap h) (lambda (x) (- 0.0 (h x))))
     (define (pick p) (lambda (x) (+ x (car p))))
     (iterate (make 0.5) 1.0 20) (iterate (make 3) 1 30) (iterate (wrap (lambda (y) (* y 0.5))) 1.0 20)
     (iterate (wrap (lambda (y) (* y 0.25))) 1.0 20) (iterate (wrap (wrap (lambda (y) (* y 2)))) 1 10)
     (iterate (lambda (x) (* x 0.5)) 1.0 20) (iterate (wrap (make 2)) 1 12)
     ((derivative-R (lambda (c) (iterate (make c) 1.0 20))) 0.5)
     ((derivative-F (lambda (c) (iterate (make c) 1.0 20))) 0.5)
     ((derivative-R (lambda (u) ((derivative-F (lambda (c) (* u (iterate (make c) u 6)))) u))) 1.5)
     ((gradient-R (lambda (l) (iterate (pick l) 0.0 10))) (list 1.0 2.0))
     (iterate (pick (list 1 2)) 0 10) (iterate (pick 5) 0 10) (iterate (make #t) 1.0 3) (iterate (make 2) 1 70)",
    // closures whose lambdas' bodies run in compiled code where the
    // evaluator calls them (`jit::run_closure`): a derivative's function, on
    // its level's reals (a closure calling one it captured, which calls a
    // let-bound lambda, as the saddle's inner objective does), on two
    // levels' reals, on plain numbers (`map`'s calls); misused (a boolean
    // where a number is, a list too short)
    "(define (make a) (let* ((f (lambda (u v) (- (* (* u u) a) (* v (* a a))))) (h (lambda (y) (f (car y) (cadr y))))) (lambda (x) (- 0.0 (h x)))))
     ((gradient-R (make 3.0)) (list 2.0 5.0)) ((gradient-R (make 3)) (list 2 5)) ((gradient-F (make 3.0)) (list 2.0 5.0))
     ((gradient-R (make 0.5)) (list -1.0 4.0)) ((gradient-R (make 2)) (list 0.25 1.0))
     ((derivative-F (lambda (a) (cadr ((gradient-R (make a)) (list 2.0 5.0))))) 3.0)
     ((derivative-R (lambda (a) (car ((gradient-R (make a)) (list 2.0 5.0))))) 3.0)
     ((gradient-R (lambda (l) ((make (car l)) (list (cadr l) 1.0)))) (list 3.0 2.0))
     (map (make 2.0) (list (list 1.0 2.0) (list 3.0 4.0) (list 3 4)))
     ((gradient-R (make #t)) (list 2.0 5.0)) ((gradient-R (make 3.0)) (list #t 5.0)) ((gradient-R (make 3.0)) (list 2.0))",
    // closures calling primitives, the calls made by the evaluator's code
    // for them (`jit::call_prim`): a gradient's closure a descent calls (its
    // body a call of `%real-vjp`), under a gradient too; list primitives; a
    // primitive failing
    "(define (iterate f x n) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (f x)))))
     (define (descend g x n) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (map2 - x (map (lambda (d) (* 0.1 d)) (g x)))))))
     (define (q x) (+ (* (car x) (car x)) (* 3.0 (* (cadr x) (cadr x)))))
     (descend (gradient-R q) (list 1.0 2.0) 30) (descend (gradient-F q) (list 1.0 2.0) 30)
     ((gradient-R (lambda (w) (car (descend (gradient-R (lambda (x) (* (car w) (q x)))) (list 1.0 2.0) 10)))) (list 0.5))
     (define (last-of k) (lambda (l) (+ k (list-ref l (- (length l) 1)))))
     (iterate (lambda (l) (cons ((last-of 1) l) l)) (list 0) 20) (iterate (lambda (l) (append l (list (length l)))) (list 0) 10)
     ((gradient-R (lambda (x) (iterate (lambda (y) (* y (list-ref x 1))) 1.0 5))) (list 1.0 2.0))
     (iterate (lambda (l) (list-ref l 3)) (list 1 2) 3)",
    // a procedure that takes four arguments
    "(define (f4 a b c d) (if (< a 1) (+ b (* c d)) (f4 (- a 1) c d (+ b 1))))
     (f4 10 1 2 3) (f4 5 1.5 2 3) (f4 3 #t 1 1)",
];

/// What running `src` shows (`common::outcome`), with every procedure that
/// can be compiled at its first call (`jit`), or never.
fn outcome(src: &str, jit: bool, limit: Option<(&str, u64)>) -> String {
    common::outcome(src, &|m: &mut vlad::eval::Machine| m.jit_after = jit as u64, limit)
}

#[test]
fn compiled_code_behaves_as_the_evaluator() {
    let before = vlad::jit::runs();
    for src in PROGRAMS {
        let limits: Vec<Option<(&str, u64)>> = std::iter::once(None)
            .chain([2, 3, 5, 8, 24, 100, 500].map(|n| Some(("depth", n))))
            .chain([1, 3, 10, 60, 500, 5000, 20000].map(|n| Some(("steps", n))))
            .collect();
        for limit in limits {
            let (on, off) = (outcome(src, true, limit), outcome(src, false, limit));
            assert_eq!(on, off, "program (limit {limit:?}):\n{src}");
        }
    }
    if cfg!(feature = "jit") {
        assert!(vlad::jit::runs() > before + 100, "compiled code hardly ran");
    }
}

/// A procedure calling itself in tail position runs as a loop; its
/// iterations count towards compiling it, and once it is compiled the loop
/// goes on in compiled code (each iteration is the tail call it stands for):
/// the same values, steps and errors, at step limits on either side of the
/// switch, and past it.
#[test]
fn a_loop_goes_on_in_compiled_code() {
    let src = "(define (count n acc) (if (= n 0) acc (count (- n 1) (+ acc 1))))
               (define (halves n acc) (if (= n 0) acc (halves (- n 1) (+ acc (* 0.5 n)))))
               (define (grow n acc) (if (= n 0) acc (grow (- n 1) (* acc 3))))
               (count 3000 0) (halves 3000 0.0) (halves 2999 0) (grow 100 1) (count 2000 #f)";
    let outcome_after = |after: u64, limit: Option<u64>| {
        common::outcome(src, &|m: &mut vlad::eval::Machine| m.jit_after = after, limit.map(|n| ("steps", n)))
    };
    let before = vlad::jit::runs();
    for limit in
        [None, Some(99), Some(100), Some(101), Some(102), Some(1500), Some(3000), Some(3001), Some(3002)]
    {
        assert_eq!(outcome_after(100, limit), outcome_after(0, limit), "limit {limit:?}");
    }
    if cfg!(feature = "jit") {
        assert!(vlad::jit::runs() > before, "compiled code never ran");
    }
    // (count 3000 0) is 3000, in 3002 steps (the expression, the call, 3000
    // iterations); the sum of n/2 for n = 1 ... 3000 is 3000 * 3001 / 4
    let all = outcome_after(100, None);
    assert!(all.starts_with("3000\n3002 steps\n2250750.0\n"), "{all}");
}

/// A session compiling each numeric procedure after `after` calls; `None`
/// (the test skipped, visibly) where the build has no tier of compiled code.
fn jit_session(after: u64) -> Option<Session> {
    if !cfg!(feature = "jit") {
        println!("SKIPPED: built without the `jit` feature");
        return None;
    }
    let mut s = Session::new();
    s.m.jit_after = after;
    Some(s)
}

/// The printed value of expression `e`, run in `s`.
fn value(s: &mut Session, e: &str) -> String {
    let vs = s.run_text("e.vlad", e).expect("the expression runs");
    vlad::print::to_string(&vs[0])
}

/// Whether the global `name` holds a procedure with compiled code.
fn compiled(s: &Session, name: &str) -> bool {
    let g = s.m.globals.iter().find(|g| &*g.name == name).expect("a global of that name");
    match &g.state {
        GState::Value(Value::Closure(inst, 0)) => {
            inst.group.code.get().is_some_and(|c| c.members.iter().any(vlad::jit::is_compiled))
        }
        _ => false,
    }
}

#[test]
fn numeric_procedures_are_compiled_after_their_calls() {
    let Some(mut s) = jit_session(50) else { return };
    let defs = "(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
                (define (tri n) (let loop ((i n) (acc 0)) (if (<= i 0) acc (loop (- i 1) (+ acc i)))))
                (define (len xs) (if (null? xs) 0 (+ 1 (len (cdr xs)))))
                (define (twice n) (* 2 (tri n)))
                (define (go k) (if (= k 0) 0 (+ (twice 10) (go (- k 1)))))
                (define (more k) (if (= k 0) 0 (+ k (more (- k 1)))))
                (define (rep k) (if (= k 0) 0 (+ (* 2 (more 5)) (rep (- k 1)))))";
    s.run_text("d.vlad", defs).expect("the definitions run");
    // fewer calls than the threshold: still in the evaluator
    assert_eq!(value(&mut s, "(fib 5)"), "5");
    assert!(!compiled(&s, "fib"));
    let before = vlad::jit::runs();
    // fib(25) by its closed form's recurrence, computed here
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..25 {
        (a, b) = (b, a + b);
    }
    assert_eq!(value(&mut s, "(fib 25)"), a.to_string());
    assert!(compiled(&s, "fib"));
    assert!(vlad::jit::runs() > before);
    // `twice` and `tri` run in place in `go` (they are not entered):
    // compiled there, the loop of `tri` included
    assert_eq!(value(&mut s, "(go 100)"), (100 * 2 * 55).to_string());
    assert!(compiled(&s, "go"));
    for _ in 0..60 {
        value(&mut s, "(rep 3)");
    }
    assert_eq!(value(&mut s, "(rep 1000)"), (1000 * 2 * 15).to_string());
    assert!(compiled(&s, "rep") && compiled(&s, "more"), "a procedure and the one it calls");
    // a list walk is compiled too
    for _ in 0..60 {
        value(&mut s, "(len (list 1 2 3))");
    }
    assert!(compiled(&s, "len"));
    assert_eq!(value(&mut s, "(len (list 1 2 3 4 5 6 7))"), "7");
}

/// Compiled code holds the pairs of its arguments without counting them
/// (see `jit::PAIR`); one it returns is counted, so it outlives the list it
/// was part of. A list of AD values reaching compiled code makes it give
/// up at its first arithmetic, and the evaluator computes the derivative.
#[test]
fn lists_in_compiled_code() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text(
        "d.vlad",
        "(define (drop l k) (if (= k 0) l (drop (cdr l) (- k 1))))
         (define (sum l) (let loop ((l l) (s 0.0)) (if (null? l) s (loop (cdr l) (+ s (* (car l) (car l)))))))
         (define (numbers n) (if (= n 0) '() (cons (real n) (numbers (- n 1)))))",
    )
    .expect("the definitions run");
    // (numbers 5) is a new list, (5 4 3 2 1) (`real` leaves an exact
    // integer as it is), held by the argument alone: its tail (2 1) is what
    // is left of it afterwards
    for _ in 0..3 {
        assert_eq!(value(&mut s, "(drop (numbers 5) 3)"), "(2 1)");
    }
    assert!(compiled(&s, "drop"));
    // (its loop, compiled on its own, goes on in compiled code)
    let before = vlad::jit::runs();
    assert_eq!(value(&mut s, "(sum (list 1.0 2.0 3.0))"), "14.0");
    assert_eq!(vlad::jit::runs(), before + 1);
    // d/dx of x^2 + (2x)^2 = 10x, at x = 3
    assert_eq!(value(&mut s, "((derivative-R (lambda (x) (sum (list x (* 2.0 x))))) 3.0)"), "30.0");
    assert_eq!(value(&mut s, "((derivative-F (lambda (x) (sum (list x (* 2.0 x))))) 3.0)"), "30.0");
    // the gradient of the sum of squares is twice the point
    assert_eq!(value(&mut s, "((gradient-R sum) (list 1.0 -2.0))"), "(2.0 -4.0)");
}

/// Compiled code makes pairs (`cons`, and the lists of `map` and `map2`,
/// whose procedures' bodies it runs in place of their calls) that outlive
/// it where it returns them, in part or whole; a loop that makes more than
/// compiled code holds at once gives up, and the evaluator runs it.
#[test]
fn lists_made_in_compiled_code() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text(
        "d.vlad",
        "(define (v- u v) (map2 - u v))
         (define (k*v k v) (map (lambda (x) (* k x)) v))
         (define (pairs v) (map (lambda (x) (list x (* x x))) v))
         (define (range n acc) (if (= n 0) acc (range (- n 1) (cons n acc))))
         (define (shrink x k) (if (= k 0) x (shrink (v- x (k*v 0.5 x)) (- k 1))))",
    )
    .expect("the definitions run");
    for _ in 0..3 {
        assert_eq!(value(&mut s, "(v- (list 5 2.5) (list 1 0.5))"), "(4 2.0)");
        assert_eq!(value(&mut s, "(cdr (k*v 3 (list 1 2 3)))"), "(6 9)");
        assert_eq!(value(&mut s, "(cadr (pairs (list 1 2.5)))"), "(2.5 6.25)");
    }
    // (`v-` is run in place at each call, by the evaluator's walk: only a
    // walk calling a procedure is compiled there, see `jit::runs_long`)
    for f in ["k*v", "pairs"] {
        assert!(compiled(&s, f), "{f}");
    }
    // n(n+1)/2 and the sum of squares n(n+1)(2n+1)/6, of a list made in
    // compiled code and walked in the evaluator
    let before = vlad::jit::runs();
    assert_eq!(value(&mut s, "(fold-left + 0 (range 1000 '()))"), "500500");
    assert_eq!(value(&mut s, "(fold-left + 0 (map (lambda (x) (* x x)) (range 100 '())))"), "338350");
    assert!(vlad::jit::runs() > before);
    // x - x/2, k times, of 1 and -4 (computed here: halved to the least
    // subnormal, which stays); 20 times, then 100000: two lists an iteration,
    // 200,000 in all, past the 65,536 values compiled code holds made at
    // once, but a loop's iterations drop what its variables no longer hold
    // (`jit::compact`), so it goes on in compiled code
    let shrunk = |k: usize| {
        let (mut a, mut b) = (1.0f64, -4.0f64);
        for _ in 0..k {
            (a, b) = (a - 0.5 * a, b - 0.5 * b);
        }
        format!("({a:?} {b:?})")
    };
    assert_eq!(value(&mut s, "(shrink (list 1.0 -4.0) 20)"), shrunk(20));
    assert!(compiled(&s, "shrink"));
    assert_eq!(value(&mut s, "(shrink (list 1.0 -4.0) 100000)"), shrunk(100000));
    assert!(compiled(&s, "shrink"), "not given up");
    // a list a loop builds is held whole by its variable, its pairs by one
    // another: 100,000 of them, their sum n(n+1)/2
    assert_eq!(value(&mut s, "(fold-left + 0 (range 100000 '()))"), "5000050000");
    assert!(compiled(&s, "range"), "not given up");
    // the same in a named `let`'s loop run on its own (at the top level):
    // a list of two made at each of 100,000 iterations, its values
    // (i, 2i) of the last
    let before = vlad::jit::runs();
    assert_eq!(
        value(
            &mut s,
            "(let loop ((i 0) (v (list 0 0))) (if (= i 100000) v (loop (+ i 1) (list i (* 2 i)))))"
        ),
        "(99999 199998)"
    );
    assert!(vlad::jit::runs() > before);
    // one built by a recursion that is not a loop holds all it made until it
    // returns: past 65,536 values, compiled code gives up, and the evaluator
    // runs the call
    s.run_text("b.vlad", "(define (build n) (if (= n 0) '() (cons n (build (- n 1)))))").expect("defined");
    assert_eq!(value(&mut s, "(length (build 10))"), "10");
    assert!(compiled(&s, "build"));
    assert_eq!(value(&mut s, "(fold-left + 0 (build 100000))"), "5000050000");
    assert!(!compiled(&s, "build"), "given up");
}

/// A definition may use a global defined later (the REPL's late binding):
/// compiled code calls what the global holds when it is compiled, and a
/// definition made again leaves the procedures defined before it as they
/// were (README, "REPL").
#[test]
fn compiled_code_calls_the_procedures_globals_hold() {
    let Some(mut s) = jit_session(1) else { return };
    s.late_binding = true;
    s.run_text("d.vlad", "(define (f n) (if (= n 0) 0 (+ (g n) (f (- n 1)))))").expect("the definition runs");
    assert!(s.run_text("e.vlad", "(f 10)").is_err(), "g is not defined yet");
    s.run_text("g.vlad", "(define (g x) (* x 2))").expect("the definition runs");
    // 2 (1 + ... + 10)
    assert_eq!(value(&mut s, "(f 10)"), "110");
    assert!(compiled(&s, "f"));
    s.run_text("r.vlad", "(define (g x) (* x 3))").expect("the redefinition runs");
    assert_eq!(value(&mut s, "(f 10)"), "110");
    assert_eq!(value(&mut s, "(g 10)"), "30");
}

/// A recursion deeper than the native stack the evaluator set out with goes
/// on in compiled code on new segments of stack, as the evaluator does (it
/// does not give up there): the value, and the code still compiled after.
#[test]
fn deep_recursion_goes_on_in_compiled_code() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text("d.vlad", "(define (down n) (if (= n 0) 0 (+ 1 (down (- n 1)))))")
        .expect("the definition runs");
    // (3 * 10^6 compiled frames take far more than one 32 MiB chunk of stack)
    for n in [10, 3_000_000] {
        assert_eq!(value(&mut s, &format!("(down {n})")), n.to_string());
        assert!(compiled(&s, "down"), "the code gave up at depth {n}");
    }
}

/// A named `let`'s loop counts its iterations, and once it is compiled on
/// its own goes on in compiled code (nothing else here is called often
/// enough to be compiled): at the top level, in a procedure called once,
/// and as a value; the sums are closed forms computed here.
#[test]
fn named_let_loops_go_on_in_compiled_code() {
    let Some(mut s) = jit_session(100) else { return };
    s.run_text(
        "d.vlad",
        "(define (tri n) (let loop ((i 0) (acc 0)) (if (> i n) acc (loop (+ i 1) (+ acc i)))))
         (define (mean n) (/ (let loop ((i 1) (acc 0.0)) (if (> i n) acc (loop (+ i 1) (+ acc (real i))))) (real n)))",
    )
    .expect("the definitions run");
    let n: i64 = 5000;
    for (e, want) in [
        (
            format!("(let loop ((i 0) (acc 0)) (if (> i {n}) acc (loop (+ i 1) (+ acc i))))"),
            (n * (n + 1) / 2).to_string(),
        ),
        (format!("(tri {n})"), (n * (n + 1) / 2).to_string()),
        (format!("(mean {n})"), format!("{:?}", (n + 1) as f64 / 2.0)),
    ] {
        let before = vlad::jit::runs();
        assert_eq!(value(&mut s, &e), want, "{e}");
        assert_eq!(vlad::jit::runs(), before + 1, "{e}: the loop did not go on in compiled code");
    }
    // Once compiled, a loop entered again runs in compiled code from its
    // first iteration, even one that ends there with no call of itself.
    // (`tril` runs in place in `tris`, which stays in the evaluator, as
    // `tril` does (`append` is not compiled): its loop is
    // compiled on its own in the first call, and each of the five entries
    // of the second runs in compiled code, the last three ending at once:
    // n = 2, 1, 0, -1, -2.)
    s.run_text(
        "t.vlad",
        "(define (tril n) (append (list (let loop ((i 0) (acc 0)) (if (> i n) acc (loop (+ i 1) (+ acc i))))) '()))
         (define (tris k acc) (if (= k 0) acc (tris (- k 1) (cons (tril (- k 3)) acc))))",
    )
    .expect("the definitions run");
    value(&mut s, "(tris 30 '())");
    let before = vlad::jit::runs();
    assert_eq!(value(&mut s, "(tris 5 '())"), "((0) (0) (0) (1) (3))");
    assert_eq!(vlad::jit::runs(), before + 5, "a loop was not entered in compiled code");
    assert!(!compiled(&s, "tril"));
}

/// A procedure holding a loop that its callers run in place (`mag`, with
/// `dot` and its loop in place in it, in `mags`, which builds a list and
/// so is not compiled) is compiled once the evaluator has taken as many
/// steps in it as the threshold says, iterations included, and each call
/// then runs whole in its compiled code. A list of AD values makes that
/// code give up, and the evaluator computes the derivative in place.
#[test]
fn procedures_run_in_place_go_on_in_compiled_code() {
    let Some(mut s) = jit_session(100) else { return };
    s.run_text(
        "d.vlad",
        "(define (dot u v) (let loop ((u u) (v v) (acc 0.0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))
         (define (mag v) (sqrt (dot v v)))
         (define (mags k acc) (if (= k 0) acc (mags (- k 1) (cons (mag (list 3.0 (real k))) acc))))",
    )
    .expect("the definitions run");
    // (10 calls of 4 steps: not yet)
    assert_eq!(value(&mut s, "(mags 1 '())"), "(3.1622776601683795)");
    assert!(!compiled(&s, "mag"));
    value(&mut s, "(mags 40 '())");
    assert!(compiled(&s, "mag"));
    let before = vlad::jit::runs();
    // |(3, k)| for k = 1 to 4, the last consed first
    let want = format!("({:?} {:?} {:?} 5.0)", 10f64.sqrt(), 13f64.sqrt(), 18f64.sqrt());
    assert_eq!(value(&mut s, "(mags 4 '())"), want);
    assert_eq!(vlad::jit::runs(), before + 4, "each call of mag runs in its compiled code");
    // d/dx |(x, 4)| = x / |(x, 4)| = 3/5 at x = 3, run in place in the
    // lambda differentiated
    for mode in ["R", "F"] {
        let d: f64 = value(&mut s, &format!("((derivative-{mode} (lambda (x) (mag (list x 4.0)))) 3.0)"))
            .parse()
            .expect("a real");
        assert!((d - 0.6).abs() < 1e-12, "derivative-{mode}: {d}");
    }
}

/// A named `let`'s loop calling the procedures its procedure was passed (a
/// descent's function and gradient) goes on in compiled code, which has the
/// evaluator make those calls: it made them (and did not give up: a second
/// run makes them again), and computes what gradient descent on x² + 3y² does:
/// each step scales x by 1 - 2η and y by 1 - 6η.
#[test]
fn loops_call_the_procedures_their_frames_hold() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text(
        "d.vlad",
        "(define (descend f g x eta n)
           (let loop ((x x) (i 0) (best (f x)))
             (if (= i n) (list x best)
                 (let* ((gx (g x)) (x1 (map2 - x (map (lambda (d) (* eta d)) gx))) (fx1 (f x1)))
                   (if (< fx1 best) (loop x1 (+ i 1) fx1) (loop x (+ i 1) best))))))
         (define (quad x) (+ (* (car x) (car x)) (* (* 3.0 (length (cdr x))) (* (cadr x) (cadr x)))))
         (define (dquad x) (list (* 2.0 (car x)) (* 6.0 (cadr x)) (length x)))
         (define (dq x) (reverse (cdr (reverse (dquad x)))))",
    )
    .expect("the definitions run");
    let (x, y) = (0.8f64.powi(50), 2.0 * 0.4f64.powi(50));
    for _ in 0..2 {
        let before = vlad::jit::value_calls();
        let v = value(&mut s, "(descend quad dq (list 1.0 2.0) 0.1 50)");
        // (compiled after its first iteration or two, the loop makes two
        // calls an iteration)
        let calls = vlad::jit::value_calls() - before;
        assert!((90..=100).contains(&calls), "{calls} calls made from compiled code");
        let nums: Vec<f64> =
            v.replace(['(', ')'], " ").split_whitespace().map(|t| t.parse().expect("a number")).collect();
        assert_eq!(nums.len(), 3, "{v}");
        for (got, want) in nums.iter().zip([x, y, x * x + 3.0 * y * y]) {
            assert!((got - want).abs() <= 1e-12 * want.abs().max(1e-300), "{v}: {got} against {want}");
        }
    }
    // Under a derivative the loop goes on in compiled code too, the calls
    // and the arithmetic on the tape's reals (the list of them the gradient
    // returns, scaled and subtracted by walks; the comparison of two values)
    // made by the evaluator: its 5 iterations make 10 calls, each time (had
    // it given up, the next run would make none), and the gradient is the
    // closed form's.
    for _ in 0..2 {
        let before = vlad::jit::value_calls();
        let d = value(&mut s, "((gradient-R (lambda (x) (cadr (descend quad dq x 0.1 5)))) (list 1.0 2.0))");
        // d/dx of x² 0.8^10 + 3 (y 0.4^5)²: (2x 0.8^10, 6y 0.4^10)
        let want = [2.0 * 0.8f64.powi(10), 12.0 * 0.4f64.powi(10)];
        let got: Vec<f64> =
            d.replace(['(', ')'], " ").split_whitespace().map(|t| t.parse().expect("a number")).collect();
        assert_eq!(got.len(), 2, "{d}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-12 * w.abs(), "{d}: {g} against {w}");
        }
        assert_eq!(vlad::jit::value_calls() - before, 10, "calls made from compiled code under a derivative");
    }
}

/// A loop calling a procedure value under a derivative that gives up there
/// (`sqrt` of a real of the tape, which compiled code does not compute
/// with) after making calls that recorded on the tape: the evaluator runs it
/// again from where it was entered (what the calls recorded forgotten), and
/// the derivative is the closed form's; it is not entered in compiled code
/// under a derivative again, but still is where none is taken. With
/// f(a) = a w, the loop computes w, w², w³, w⁴, √w⁵, w^3.5: its derivative
/// is 3.5 w^2.5. (`walk` runs in place in `run`, its one caller: one loop;
/// `run` calls itself, so that it is not run in place in its callers.)
#[test]
fn loops_giving_up_under_a_derivative_run_again_in_the_evaluator() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text(
        "w.vlad",
        "(define (walk f n)
           (let loop ((i 0) (acc (f 1.0)))
             (if (= i n) acc (loop (+ i 1) (if (= i 3) (sqrt (f acc)) (f acc))))))
         (define (run w) (if (< w -100.0) (run (+ w 1.0)) (walk (lambda (a) (* a w)) 5)))",
    )
    .expect("the definitions run");
    let real = |v: String| -> f64 { v.parse().expect("a real") };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    let (primal, derivative) = ("(run 2.0)", "((derivative-R run) 2.0)");
    assert!(close(real(value(&mut s, primal)), 2f64.powf(3.5)));
    let before = vlad::jit::value_calls();
    assert!(close(real(value(&mut s, primal)), 2f64.powf(3.5)));
    assert_eq!(vlad::jit::value_calls() - before, 5, "the primal's calls, from compiled code");
    let want = 3.5 * 2f64.powf(2.5);
    let before = vlad::jit::value_calls();
    assert!(close(real(value(&mut s, derivative)), want));
    assert_eq!(vlad::jit::value_calls() - before, 4, "the calls made before giving up at the 4th iteration");
    let before = vlad::jit::value_calls();
    assert!(close(real(value(&mut s, derivative)), want));
    assert_eq!(vlad::jit::value_calls(), before, "not entered under a derivative again");
    let before = vlad::jit::value_calls();
    assert!(close(real(value(&mut s, primal)), 2f64.powf(3.5)));
    assert_eq!(vlad::jit::value_calls() - before, 5, "still entered where no derivative is taken");
}

/// A loop under a derivative whose calls made a gradient give way to the
/// transform (here, `gradient-F` of a function whose forward sweeps are
/// lost, so later calls skip them), then gave up (the step limit reached in
/// a call): the evaluator runs it again as it would have run it (the calls
/// that gave way forgotten, `Tapes::end_journal`), so that the same steps
/// are counted and the limit is met at the same place, at every limit. (The
/// program run whole by vlad, as `desc`'s loop, compiled in the first
/// expression, is entered in the second.)
#[test]
fn giving_up_forgets_the_calls_that_gave_way() {
    if !cfg!(feature = "jit") {
        println!("SKIPPED: built without the `jit` feature");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("g.vlad");
    std::fs::write(
        &file,
        "(define (desc f g x eta n)
           (let loop ((x x) (i 0) (best (f x)))
             (if (= i n) (list x best)
                 (let* ((gx (g x)) (x1 (map2 - x (map (lambda (d) (* eta d)) gx))) (fx1 (f x1)))
                   (if (< fx1 best) (loop x1 (+ i 1) fx1) (loop x (+ i 1) best))))))
         (define (h v) (- (* (car v) (cadr v)) (/ (cadr v) (car v))))
         ((derivative-R (lambda (w) (cadr (desc h (gradient-F h) (list 1.0 2.0) 0.01 25)))) 0.5)
         ((derivative-R (lambda (w) (cadr (desc (lambda (v) (car (list 2))) (gradient-F (lambda (v) (car (list 2)))) (list 1.0 2.0) 0.1 25)))) 2.0)",
    )
    .expect("the program written");
    let run = |flag: &str, n: u32| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vlad"))
            .args([flag, "--max-steps", &n.to_string()])
            .arg(&file)
            .output()
            .expect("vlad runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for n in (200..=340).step_by(2) {
        let (on, off) = (run("--jit-after=1", n), run("--no-jit", n));
        assert_eq!(on, off, "at a limit of {n} steps");
    }
}

/// `(iterate f x n)`: `f` applied `n` times from `x`, by a loop that calls
/// the closure its frame holds; `(run f n)`, the same from 1.0 with
/// `iterate` (and its loop) run in place in it, where `run` itself is not run
/// in place in its callers, as it calls itself: one loop, whichever
/// expression calls `run`.
const ITERATE: &str = "(define (iterate f x n) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (f x)))))
                       (define (run f n) (if (< n 0) (run f (+ n 1)) (iterate f 1.0 n)))";

/// A loop calling a closure its frame holds (`iterate`'s, run in place in
/// `run` and in `again`, which are not run in place in their callers, as
/// they call themselves: one loop each), compiled while the slot held a
/// closure of a lambda whose body compiled code computes (arithmetic, pairs
/// taken apart, calls of the closures it captured: `jit::spec_ok`), runs that
/// body in place of each call made where the slot holds a closure of the same
/// lambda, on the values the closure called captured, and has the evaluator
/// make the others. Here x -> -(c x) (through a let-bound lambda the closure
/// captured, run in place too), 20 times from 1: c^20, and its derivative
/// 20 c^19, under either derivative (the loop computing with the tape's or
/// the dual numbers' reals the closure captured).
#[test]
fn loops_run_the_closures_they_call_in_place() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text("i.vlad", ITERATE).expect("the definitions run");
    s.run_text(
        "p.vlad",
        "(define (again f n) (if (< n 0) (again f (+ n 1)) (iterate f 1.0 n)))
         (define (make c) (let* ((f (lambda (u v) (* u v))) (h (lambda (y) (f y c)))) (lambda (x) (- 0.0 (h x)))))
         (define (wrap h) (lambda (x) (- 0.0 (h x))))",
    )
    .expect("the definitions run");
    let real = |v: String| -> f64 { v.parse().expect("a real") };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    // (each run goes on in compiled code after its first few iterations:
    // the rest of the calls, two an iteration, of the closure and of the one
    // it captured, are run in place)
    for (c, n) in [(0.5f64, 20), (1.25, 20), (0.75, 40)] {
        let (calls, in_place) = (vlad::jit::value_calls(), vlad::jit::in_place_calls());
        let v = real(value(&mut s, &format!("(run (make {c}) {n})")));
        assert!(close(v, c.powi(n)), "{v} against {c}^{n}");
        let ran = vlad::jit::in_place_calls() - in_place;
        assert!((2 * n as u64 - 8..=2 * n as u64).contains(&ran), "{ran} of {} calls run in place", 2 * n);
        assert_eq!(vlad::jit::value_calls() - calls, ran, "no call made by the evaluator");
    }
    for mode in ["R", "F"] {
        let in_place = vlad::jit::in_place_calls();
        let d = real(value(&mut s, &format!("((derivative-{mode} (lambda (c) (run (make c) 20))) 0.5)")));
        assert!(close(d, 20.0 * 0.5f64.powi(19)), "derivative-{mode}: {d}");
        let ran = vlad::jit::in_place_calls() - in_place;
        assert!((32..=40).contains(&ran), "derivative-{mode}: {ran} of 40 calls run in place");
    }
    // A closure of another lambda: every call made by the evaluator.
    let (calls, in_place) = (vlad::jit::value_calls(), vlad::jit::in_place_calls());
    assert!(close(real(value(&mut s, "(run (lambda (x) (* x -0.5)) 20)")), 0.5f64.powi(20)));
    assert_eq!(vlad::jit::in_place_calls(), in_place, "none run in place");
    assert_eq!(vlad::jit::value_calls() - calls, 20, "all made by the evaluator");
    // A loop compiled calling `wrap`'s closure of one lambda, then called
    // with one of another: the outer body run in place, the inner call made
    // by the evaluator (x -> -(x/4), 20 times: 4^-20).
    value(&mut s, "(again (wrap (lambda (y) (* y 0.5))) 20)");
    let (calls, in_place) = (vlad::jit::value_calls(), vlad::jit::in_place_calls());
    assert!(close(real(value(&mut s, "(again (wrap (lambda (y) (* y 0.25))) 20)")), 0.25f64.powi(20)));
    let ran = vlad::jit::in_place_calls() - in_place;
    assert!((16..=20).contains(&ran), "{ran} of the 20 outer calls run in place");
    assert_eq!(vlad::jit::value_calls() - calls, 2 * ran, "and as many inner ones made by the evaluator");
}

/// The function a derivative runs on its level's reals, a closure whose
/// lambda's body is of the kind a loop runs in place of a call
/// (`jit::spec_ok`), runs in compiled code once its lambda is compiled
/// (`jit::run_closure`), the closures it captured and calls run in place,
/// the arithmetic on the level's reals made by the evaluator for it. Here
/// k(x) = -(a x1^2 - a^2 x2), whose gradient is (-2 a x1, a^2), and the
/// derivatives in a of those, -2 x1 and 2 a.
#[test]
fn derivatives_run_their_closures_compiled() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text(
        "m.vlad",
        "(define (make a) (let* ((f (lambda (u v) (- (* (* u u) a) (* v (* a a)))))
                                 (h (lambda (y) (f (car y) (cadr y)))))
                            (lambda (x) (- 0.0 (h x)))))",
    )
    .expect("the definitions run");
    let mut runs = Vec::new();
    let mut ask = |e: String| -> f64 {
        let before = vlad::jit::closure_runs();
        let v = value(&mut s, &e).parse().expect("a real");
        runs.push(vlad::jit::closure_runs() - before);
        v
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
    let cases = [(3.0f64, 2.0f64, 5.0f64), (0.5, -1.0, 4.0), (2.0, 0.25, 1.0), (-1.5, 3.0, -2.0)];
    for (a, x1, x2) in cases {
        for mode in ["R", "F"] {
            let g = |i: &str| format!("({i} ((gradient-{mode} (make {a})) (list {x1} {x2})))");
            let (g1, g2) = (ask(g("car")), ask(g("cadr")));
            assert!(close(g1, -2.0 * a * x1) && close(g2, a * a), "gradient-{mode} at a = {a}: ({g1} {g2})");
            let d = |i: &str| {
                format!(
                    "((derivative-{mode} (lambda (a) ({i} ((gradient-R (make a)) (list {x1} {x2}))))) {a})"
                )
            };
            let (d1, d2) = (ask(d("car")), ask(d("cadr")));
            assert!(
                close(d1, -2.0 * x1) && close(d2, 2.0 * a),
                "derivative-{mode} over gradient-R: ({d1} {d2})"
            );
        }
    }
    // (each run of the function, one a gradient or derivative here, after
    // the first two calls of its lambda: the first counts down to its
    // compilation, the second compiles it and runs in the evaluator)
    assert_eq!(runs.len(), 8 * cases.len());
    assert!(runs[2..].iter().all(|&r| r == 1), "the runs in compiled code of each expression: {runs:?}");
}

/// A closure whose body runs no call in place (its calls would be made by
/// the evaluator anyway: here of a captured closure of a lambda using
/// `sqrt`) is left to the evaluator, entering compiled code to make them
/// costing more (`jit::runs_calls_in_place`); with a lambda that can run in
/// place captured instead, such a wrapper is compiled once called often
/// enough.
#[test]
fn closures_that_run_no_call_in_place_stay_in_the_evaluator() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text("w.vlad", "(define (wrap f) (lambda (x) (+ 1.0 (f x))))").expect("the definitions run");
    let before = vlad::jit::closure_runs();
    let v = value(&mut s, "(map (wrap (lambda (x) (sqrt x))) (list 1.0 4.0 9.0 16.0 25.0))");
    assert_eq!(v, "(2.0 3.0 4.0 5.0 6.0)");
    assert_eq!(vlad::jit::closure_runs(), before, "no run in compiled code");
    // (a fresh lambda of the same shape, its closure capturing one whose
    // body runs in place: its calls after the first two run compiled)
    s.run_text("v.vlad", "(define (wrap2 f) (lambda (x) (+ 1.0 (f x))))").expect("the definitions run");
    let v = value(&mut s, "(map (wrap2 (lambda (x) (* x x))) (list 1.0 2.0 3.0 4.0 5.0))");
    assert_eq!(v, "(2.0 5.0 10.0 17.0 26.0)");
    assert_eq!(vlad::jit::closure_runs() - before, 3, "the calls after the first two run compiled");
}

/// A descent's loop calling a gradient's closure (`(lambda (x) (%real-vjp
/// f x))`, of the prelude's `gradient-R`) runs its body in place of the
/// calls, the primitive's call made by the evaluator's code for it
/// (`jit::call_prim`). Here x -> x - 0.1 grad q(x) for q(x) = x1^2 + 3 x2^2:
/// (x1 0.8^n, x2 0.4^n).
#[test]
fn loops_run_gradient_closures_in_place() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text(
        "d.vlad",
        "(define (descend g x n) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (map2 - x (map (lambda (d) (* 0.1 d)) (g x)))))))
         (define (q x) (+ (* (car x) (car x)) (* 3.0 (* (cadr x) (cadr x)))))
         (define (run x n) (if (< n 0) (run x (+ n 1)) (descend (gradient-R q) x n)))",
    )
    .expect("the definitions run");
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    for (x1, x2, n) in [(1.0f64, 2.0f64, 30), (-3.0, 0.5, 40)] {
        let in_place = vlad::jit::in_place_calls();
        let v = value(&mut s, &format!("(run (list {x1} {x2}) {n})"));
        let xs: Vec<f64> =
            v.trim_matches(['(', ')']).split(' ').map(|x| x.parse().expect("a real")).collect();
        assert!(close(xs[0], x1 * 0.8f64.powi(n)) && close(xs[1], x2 * 0.4f64.powi(n)), "{v}");
        let ran = vlad::jit::in_place_calls() - in_place;
        assert!((n as u64 - 4..=n as u64).contains(&ran), "{ran} of {n} calls run in place");
    }
}

/// A long loop under a derivative whose variable holds a real of the tape (a
/// value held for the code, which moves when what the loop made is dropped,
/// `jit::compact`) goes on in compiled code to its end: here, 10⁵ calls of a
/// closure run in place, each making three of them (past the 65,536 values
/// compiled code holds at most, it would give up and the evaluator would run
/// the loop again). x -> x (1 + c 10⁻⁵), 10⁵ times from 1, is
/// (1 + c 10⁻⁵)^(10⁵), whose derivative is (1 + c 10⁻⁵)^(10⁵ - 1).
#[test]
fn long_loops_under_a_derivative_stay_compiled() {
    let Some(mut s) = jit_session(1) else { return };
    s.run_text("i.vlad", ITERATE).expect("the definitions run");
    s.run_text("l.vlad", "(define (make c) (lambda (x) (* x (+ 1.0 (* c 1e-5)))))")
        .expect("the definitions run");
    let n = 100_000;
    let (k, c) = (1.0 + 0.5e-5f64, 0.5);
    let want = k.powi(n - 1);
    for mode in ["R", "F"] {
        let in_place = vlad::jit::in_place_calls();
        let d: f64 = value(&mut s, &format!("((derivative-{mode} (lambda (c) (run (make c) {n}))) {c})"))
            .parse()
            .expect("a real");
        assert!((d - want).abs() <= 1e-9 * want, "derivative-{mode}: {d} against {want}");
        let ran = vlad::jit::in_place_calls() - in_place;
        assert!(ran >= n as u64 - 8, "derivative-{mode}: {ran} of {n} calls run in place");
    }
}
