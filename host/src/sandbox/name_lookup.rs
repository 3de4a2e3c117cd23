//! `wasi:sockets/ip-name-lookup` for plugins: WASI's implementation, in front of which every
//! lookup is checked against the instance's network grant ([`NetAccess::may_resolve`]), so a
//! name that is not granted never reaches DNS, and every address a granted name resolves to is
//! remembered as connectable on that name's ports ([`NetAccess::lookup_answered`]).
//!
//! It replaces (shadows) the interface `wasmtime_wasi::p2::add_to_linker_async` defined; the
//! resource type stays WASI's, so the other interfaces are unaffected.

use std::net::IpAddr;

use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{
    self, Host, HostResolveAddressStream, ResolveAddressStream,
};
use wasmtime_wasi::p2::bindings::sockets::network::{self, ErrorCode, IpAddress, Network};
use wasmtime_wasi::p2::{DynPollable, SocketError};
use wasmtime_wasi::sockets::WasiSocketsCtxView;

use super::capabilities::NetAccess;
use super::state::HostState;

/// The [`HasData`] of the filtered interface.
struct FilteredLookup;

impl HasData for FilteredLookup {
    type Data<'a> = LookupView<'a>;
}

/// WASI's sockets view plus the instance's grant.
struct LookupView<'a> {
    sockets: WasiSocketsCtxView<'a>,
    net: &'a NetAccess,
}

/// Define the filtered `wasi:sockets/ip-name-lookup` in `linker`, over the one WASI defined.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined =
        ip_name_lookup::add_to_linker::<HostState, FilteredLookup>(linker, |state| LookupView {
            sockets: WasiSocketsCtxView {
                ctx: state.wasi.sockets(),
                table: &mut state.table,
            },
            net: &state.net,
        });
    linker.allow_shadowing(false);
    defined
}

impl Host for LookupView<'_> {
    fn resolve_addresses(
        &mut self,
        network: Resource<Network>,
        name: String,
    ) -> Result<Resource<ResolveAddressStream>, SocketError> {
        if !self.net.may_resolve(&name) {
            return Err(ErrorCode::AccessDenied.into());
        }
        let stream = Host::resolve_addresses(&mut self.sockets, network, name.clone())?;
        self.net.lookup_started(stream.rep(), &name);
        Ok(stream)
    }
}

// `ip-name-lookup` uses `network`'s types, so its `Host` needs `network`'s: WASI's own.
impl network::Host for LookupView<'_> {
    fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
        network::Host::convert_error_code(&mut self.sockets, error)
    }

    fn network_error_code(
        &mut self,
        error: Resource<network::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        network::Host::network_error_code(&mut self.sockets, error)
    }
}

impl network::HostNetwork for LookupView<'_> {
    fn drop(&mut self, network: Resource<Network>) -> wasmtime::Result<()> {
        network::HostNetwork::drop(&mut self.sockets, network)
    }
}

impl HostResolveAddressStream for LookupView<'_> {
    fn resolve_next_address(
        &mut self,
        stream: Resource<ResolveAddressStream>,
    ) -> Result<Option<IpAddress>, SocketError> {
        let handle = stream.rep();
        let next = HostResolveAddressStream::resolve_next_address(&mut self.sockets, stream)?;
        if let Some(address) = &next {
            self.net.lookup_answered(handle, ip_of(address));
        }
        Ok(next)
    }

    fn subscribe(
        &mut self,
        stream: Resource<ResolveAddressStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        HostResolveAddressStream::subscribe(&mut self.sockets, stream)
    }

    fn drop(&mut self, stream: Resource<ResolveAddressStream>) -> wasmtime::Result<()> {
        self.net.lookup_ended(stream.rep());
        HostResolveAddressStream::drop(&mut self.sockets, stream)
    }
}

fn ip_of(address: &IpAddress) -> IpAddr {
    match *address {
        IpAddress::Ipv4((a, b, c, d)) => IpAddr::from([a, b, c, d]),
        IpAddress::Ipv6((a, b, c, d, e, f, g, h)) => IpAddr::from([a, b, c, d, e, f, g, h]),
    }
}
