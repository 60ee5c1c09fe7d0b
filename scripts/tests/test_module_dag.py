"""scripts/module-dag.py on tiny synthetic crates: what is an arrow, what is a cycle, and how the
list of known cycles is held to the tree."""

import contextlib
import importlib.util
import io
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("module_dag", os.path.join(HERE, "..", "module-dag.py"))
module_dag = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(module_dag)


class SyntheticCrate(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.src = os.path.join(self.dir.name, "src")

    def tearDown(self):
        self.dir.cleanup()

    def tree(self, files):
        for rel, text in files.items():
            path = os.path.join(self.src, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

    def known(self, lines):
        path = os.path.join(self.dir.name, "known")
        with open(path, "w", encoding="utf-8") as f:
            f.write("# today's cycles\n" + "".join(line + "\n" for line in lines))
        return path

    def check(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = module_dag.main([self.src, *args])
        return rc, out.getvalue()

    def graph(self):
        return {m: sorted(n) for m, n in module_dag.Crate(self.src).graph().items()}

    def test_a_tree_without_a_cycle_passes(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::Thing;\nfn f() -> Thing { crate::b::make() }\n",
            "b.rs": "pub struct Thing;\npub fn make() -> Thing { Thing }\n",
        })
        self.assertEqual(self.graph(), {"a": ["b"]})
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_a_cycle_fails_and_is_named(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::Thing;\npub struct Other;\n",
            "b.rs": "pub struct Thing;\nfn g() { let _ = crate::a::Other; }\n",
        })
        rc, out = self.check()
        self.assertEqual(rc, 1)
        self.assertIn("NEW cycle: a -> b -> a", out)
        self.assertIn("NEW cycle: b -> a -> b", out)

    def test_a_cycle_through_a_third_module_is_found(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::{b::B, c};\n",
            "b.rs": "use crate::c::C;\npub struct B;\n",
            "c.rs": "pub struct C;\nuse crate::a as first;\n",
        })
        self.assertEqual(self.graph(), {"a": ["b", "c"], "b": ["c"], "c": ["a"]})
        rc, out = self.check()
        self.assertEqual(rc, 1)
        self.assertIn("NEW cycle: a -> b -> c -> a", out)

    def test_known_cycles_pass_and_a_new_one_fails(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "use crate::a::A;\npub struct B;\n",
            "c.rs": "pub struct C;\n",
        })
        known = self.known(["a -> b", "b -> a"])
        self.assertEqual(self.check("--known", known)[0], 0)
        # A new import closes a cycle the list does not hold.
        self.tree({"c.rs": "use crate::a::A;\npub struct C;\n", "a.rs": "use crate::{b::B, c::C};\npub struct A;\n"})
        rc, out = self.check("--known", known)
        self.assertEqual(rc, 1)
        self.assertIn("NEW cycle: a -> c -> a", out)
        self.assertNotIn("NEW cycle: a -> b", out)

    def test_a_broken_cycle_must_leave_the_list(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\n",
            "b.rs": "pub struct B;\n",
        })
        rc, out = self.check("--known", self.known(["a -> b", "b -> a"]))
        self.assertEqual(rc, 1)
        self.assertIn("`a -> b` no longer closes a cycle: remove it", out)
        self.assertIn("`b -> a` no longer closes a cycle: remove it", out)

    def test_write_known_writes_what_the_check_then_accepts(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\n",
            "b.rs": "use super::a;\npub struct B;\n",
        })
        path = os.path.join(self.dir.name, "written")
        self.assertEqual(self.check("--write-known", path)[0], 0)
        self.assertEqual(module_dag.read_known(path), {("a", "b"), ("b", "a")})
        self.assertEqual(self.check("--known", path)[0], 0)

    def test_comments_strings_and_test_modules_are_not_imports(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": (
                "//! Used by [`crate::a::A`].\n"
                "pub struct B;\n"
                "/* crate::a::A */\n"
                "const S: &str = \"crate::a::A\";\n"
                "const R: &str = r#\"use crate::a::A;\"#;\n"
                "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n    fn t() { let _ = { A }; }\n}\n"
            ),
        })
        self.assertEqual(self.graph(), {"a": ["b"]})
        self.assertEqual(self.check()[0], 0)

    def test_paths_resolve_through_nesting_super_children_and_reexports(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\npub use b::Thing;\n",
            "a/mod.rs": "mod inner;\nuse inner::Deep;\n",
            "a/inner.rs": "use super::super::Thing;\npub struct Deep;\n",
            "b.rs": "pub struct Thing;\n",
        })
        # `super::super::Thing` is the root's re-export of b's Thing: an arrow to b, not to the
        # root; the root's `pub use b::Thing` is its own arrow to b.
        self.assertEqual(self.graph(), {"crate": ["b"], "a": ["a::inner"], "a::inner": ["b"]})


    def test_an_item_the_root_imports_from_another_crate_is_no_arrow(self):
        self.tree({
            "lib.rs": "mod a;\nmod b;\npub use other_crate::Errno;\nuse b::Helper;\npub struct Local;\n",
            "a.rs": "use crate::Errno;\nfn f() -> crate::Helper { todo!() }\n",
            "b.rs": "pub struct Helper;\nfn g() -> crate::Local { crate::Local }\n",
        })
        # `crate::Errno` is other_crate's; `crate::Helper` is b's (a private import of the root,
        # which its descendants may name); `crate::Local` is the root's own.
        self.assertEqual(self.graph(), {"crate": ["b"], "a": ["b"], "b": ["crate"]})

if __name__ == "__main__":
    unittest.main()
