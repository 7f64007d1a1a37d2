//! Tenants named in sentences and headings with their role said once, the same in the
//! terminal table, the exports and the HTML report.

/// A tenant in a sentence, its role said once: `the victim` for a tenant named after its
/// role, `victim-2` for a name that holds it, else `victim web`.
pub(crate) fn tenant_noun(name: &str, role: &str) -> String {
    if name == role {
        format!("the {role}")
    } else if name.to_lowercase().contains(role) {
        name.to_string()
    } else {
        format!("{role} {name}")
    }
}

/// A tenant as a heading, its role said once: `Victim`, `victim-2`, `Victim web`.
pub(crate) fn tenant_title(name: &str, role: &str) -> String {
    if name == role {
        capitalised(role)
    } else if name.to_lowercase().contains(role) {
        name.to_string()
    } else {
        format!("{} {name}", capitalised(role))
    }
}

pub(crate) fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_is_said_once() {
        assert_eq!(tenant_noun("victim", "victim"), "the victim");
        assert_eq!(tenant_noun("victim-2", "victim"), "victim-2");
        assert_eq!(tenant_noun("web", "victim"), "victim web");
        assert_eq!(tenant_title("victim", "victim"), "Victim");
        assert_eq!(tenant_title("web", "victim"), "Victim web");
    }
}
