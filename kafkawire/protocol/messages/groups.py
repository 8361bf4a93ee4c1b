"""The classic consumer group APIs: JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['JoinGroupRequest', 'JoinGroupResponse', 'HeartbeatRequest', 'HeartbeatResponse', 'LeaveGroupRequest', 'LeaveGroupResponse', 'SyncGroupRequest', 'SyncGroupResponse', 'DescribeGroupsRequest', 'DescribeGroupsResponse', 'ListGroupsRequest', 'ListGroupsResponse', 'DeleteGroupsRequest', 'DeleteGroupsResponse']


class JoinGroupRequest(Message):
    """The JoinGroup request body."""

    class JoinGroupRequestProtocol(Struct):
        FIELDS = (
            F('Name', STRING, '0+'),
            F('Metadata', BYTES, '0+'),
        )

    API_KEY = 11
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    FIELDS = (
        F('GroupId', STRING, '0+'),
        F('SessionTimeoutMs', INT32, '0+'),
        F('RebalanceTimeoutMs', INT32, '1+', default=-1),
        F('MemberId', STRING, '0+'),
        F('GroupInstanceId', STRING, '5+', nullable='5+', default=None),
        F('ProtocolType', STRING, '0+'),
        F('Protocols', Array(JoinGroupRequestProtocol), '0+'),
        F('Reason', STRING, '8+', nullable='8+', default=None),
    )


class JoinGroupResponse(Message):
    """The JoinGroup response body."""

    class JoinGroupResponseMember(Struct):
        FIELDS = (
            F('MemberId', STRING, '0+'),
            F('GroupInstanceId', STRING, '5+', nullable='5+', default=None),
            F('Metadata', BYTES, '0+'),
        )

    API_KEY = 11
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    FIELDS = (
        F('ThrottleTimeMs', INT32, '2+'),
        F('ErrorCode', INT16, '0+'),
        F('GenerationId', INT32, '0+', default=-1),
        F('ProtocolType', STRING, '7+', nullable='7+', default=None),
        F('ProtocolName', STRING, '0+', nullable='7+'),
        F('Leader', STRING, '0+'),
        F('SkipAssignment', BOOL, '9+'),
        F('MemberId', STRING, '0+'),
        F('Members', Array(JoinGroupResponseMember), '0+'),
    )


class HeartbeatRequest(Message):
    """The Heartbeat request body."""

    API_KEY = 12
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    FIELDS = (
        F('GroupId', STRING, '0+'),
        F('GenerationId', INT32, '0+'),
        F('MemberId', STRING, '0+'),
        F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
    )


class HeartbeatResponse(Message):
    """The Heartbeat response body."""

    API_KEY = 12
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
    )


class LeaveGroupRequest(Message):
    """The LeaveGroup request body."""

    class MemberIdentity(Struct):
        FIELDS = (
            F('MemberId', STRING, '3+'),
            F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
            F('Reason', STRING, '5+', nullable='5+', default=None),
        )

    API_KEY = 13
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    FIELDS = (
        F('GroupId', STRING, '0+'),
        F('Members', Array(MemberIdentity), '3+'),
        F('MemberId', STRING, '0-2'),
    )


class LeaveGroupResponse(Message):
    """The LeaveGroup response body."""

    class MemberResponse(Struct):
        FIELDS = (
            F('MemberId', STRING, '3+'),
            F('GroupInstanceId', STRING, '3+', nullable='3+'),
            F('ErrorCode', INT16, '3+'),
        )

    API_KEY = 13
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
        F('Members', Array(MemberResponse), '3+'),
    )


class SyncGroupRequest(Message):
    """The SyncGroup request body."""

    class SyncGroupRequestAssignment(Struct):
        FIELDS = (
            F('MemberId', STRING, '0+'),
            F('Assignment', BYTES, '0+'),
        )

    API_KEY = 14
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    FIELDS = (
        F('GroupId', STRING, '0+'),
        F('GenerationId', INT32, '0+'),
        F('MemberId', STRING, '0+'),
        F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
        F('ProtocolType', STRING, '5+', nullable='5+', default=None),
        F('ProtocolName', STRING, '5+', nullable='5+', default=None),
        F('Assignments', Array(SyncGroupRequestAssignment), '0+'),
    )


class SyncGroupResponse(Message):
    """The SyncGroup response body."""

    API_KEY = 14
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
        F('ProtocolType', STRING, '5+', nullable='5+', default=None),
        F('ProtocolName', STRING, '5+', nullable='5+', default=None),
        F('Assignment', BYTES, '0+'),
    )


class DescribeGroupsRequest(Message):
    """The DescribeGroups request body."""

    API_KEY = 15
    VERSIONS = (0, 5)
    FLEXIBLE = 5
    FIELDS = (
        F('Groups', Array(STRING), '0+'),
        F('IncludeAuthorizedOperations', BOOL, '3+'),
    )


class DescribeGroupsResponse(Message):
    """The DescribeGroups response body."""

    class DescribedGroup(Struct):
        class DescribedGroupMember(Struct):
            FIELDS = (
                F('MemberId', STRING, '0+'),
                F('GroupInstanceId', STRING, '4+', nullable='4+', default=None),
                F('ClientId', STRING, '0+'),
                F('ClientHost', STRING, '0+'),
                F('MemberMetadata', BYTES, '0+'),
                F('MemberAssignment', BYTES, '0+'),
            )

        FIELDS = (
            F('ErrorCode', INT16, '0+'),
            F('GroupId', STRING, '0+'),
            F('GroupState', STRING, '0+'),
            F('ProtocolType', STRING, '0+'),
            F('ProtocolData', STRING, '0+'),
            F('Members', Array(DescribedGroupMember), '0+'),
            F('AuthorizedOperations', INT32, '3+', default=-2147483648),
        )

    API_KEY = 15
    VERSIONS = (0, 5)
    FLEXIBLE = 5
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('Groups', Array(DescribedGroup), '0+'),
    )


class ListGroupsRequest(Message):
    """The ListGroups request body."""

    API_KEY = 16
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    FIELDS = (
        F('StatesFilter', Array(STRING), '4+'),
        F('TypesFilter', Array(STRING), '5+'),
    )


class ListGroupsResponse(Message):
    """The ListGroups response body."""

    class ListedGroup(Struct):
        FIELDS = (
            F('GroupId', STRING, '0+'),
            F('ProtocolType', STRING, '0+'),
            F('GroupState', STRING, '4+'),
            F('GroupType', STRING, '5+'),
        )

    API_KEY = 16
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
        F('Groups', Array(ListedGroup), '0+'),
    )


class DeleteGroupsRequest(Message):
    """The DeleteGroups request body."""

    API_KEY = 42
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    FIELDS = (
        F('GroupsNames', Array(STRING), '0+'),
    )


class DeleteGroupsResponse(Message):
    """The DeleteGroups response body."""

    class DeletableGroupResult(Struct):
        FIELDS = (
            F('GroupId', STRING, '0+'),
            F('ErrorCode', INT16, '0+'),
        )

    API_KEY = 42
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', Array(DeletableGroupResult), '0+'),
    )
