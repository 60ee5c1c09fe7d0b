//! A program that links `arena` but keeps the system allocator (every program but the
//! preloaded library and the placement tests): asking for the family arena maps nothing.

#[test]
fn without_scoped_alloc_as_global_allocator_no_family_arena_is_made() {
    assert!(arena::enable_family().is_none(), "a scope would place nothing in it");
    assert!(arena::family().is_none());
}
