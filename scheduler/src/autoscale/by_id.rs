//! Values kept per instance across periods, by instance id (snapshot indices change between
//! periods as instances come and go).

/// A value per instance id, fed once per period with every instance: an id not fed in a
/// period is forgotten when it ends ([`ById::end_period`]). Entries are updated in place, so
/// a period allocates only for instances new to it.
#[derive(Debug, Clone)]
pub(crate) struct ById<V> {
    map: foldhash::HashMap<String, (V, u64)>,
    period: u64,
}

impl<V> Default for ById<V> {
    fn default() -> Self {
        ById {
            map: foldhash::HashMap::default(),
            period: 0,
        }
    }
}

impl<V> ById<V> {
    /// The value fed for `id` in the last period that fed it (before [`Self::end_period`], this
    /// one's if already fed).
    pub(crate) fn get(&self, id: &str) -> Option<&V> {
        self.map.get(id).map(|(v, _)| v)
    }

    /// Feeds `id`'s value for the current period.
    pub(crate) fn set(&mut self, id: &str, value: V) {
        let period = self.period;
        match self.map.get_mut(id) {
            Some(entry) => *entry = (value, period),
            None => {
                self.map.insert(id.to_owned(), (value, period));
            }
        }
    }

    /// Ends the current period: forgets every id it did not feed.
    pub(crate) fn end_period(&mut self) {
        let period = self.period;
        self.map.retain(|_, (_, fed)| *fed == period);
        self.period += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_not_fed_in_a_period_is_forgotten_and_others_keep_their_value() {
        let mut m = ById::default();
        m.set("a", 1);
        m.set("b", 2);
        m.end_period();
        assert_eq!((m.get("a"), m.get("b")), (Some(&1), Some(&2)));
        m.set("a", 3);
        m.end_period();
        assert_eq!((m.get("a"), m.get("b")), (Some(&3), None));
        m.end_period();
        assert_eq!(m.get("a"), None);
    }
}
