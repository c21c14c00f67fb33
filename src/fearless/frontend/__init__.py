"""Python source -> AST -> typed IR: the frontend core both tracks share.

source.py reads a function (AST, globals, user locations); values.py says what an expression
denotes while lowering (literals, Python objects) and folds literals; core.py is the `Lowerer`
both tracks subclass (dispatch, names, assignment, one wording per mistake); loops.py re-lowers a
loop whose carried type was guessed from a literal. The tracks' lowerers are simt/lower.py
(entry simt/frontend.py) and tile/frontend.py (entry tile/compiler.py).
"""
